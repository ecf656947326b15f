import pytest

from sidecar.sandbox.policy import DEFAULT, Patch, check_host, host_allowed, parse_size, resolve, widenings


def test_the_user_wins_over_the_manifest_and_unset_fields_fall_through() -> None:
    manifest = Patch(network="full", memory_bytes=512 << 20, timeout_seconds=30)
    user = Patch(network="none")
    got = resolve(manifest, None, user)
    assert got.network == "none"
    assert got.memory_bytes == 512 << 20 and got.timeout_seconds == 30
    assert got.max_processes == DEFAULT.max_processes == 64


def test_seed_004_defaults_widen_nothing() -> None:
    assert (DEFAULT.timeout_seconds, DEFAULT.memory_bytes, DEFAULT.network) == (9.0, 256 << 20, "none")
    assert widenings(DEFAULT) == []


def test_each_widening_is_named_for_the_warning_before_install() -> None:
    wide = resolve(Patch(network="allowedHosts", allowed_hosts=("api.example.com",), writable=("/srv/out",),
                         memory_bytes=1 << 30, max_processes=128, timeout_seconds=60))
    by_field = {w.field: w.message for w in widenings(wide)}
    assert by_field["sandbox.network"] == "may connect to api.example.com"
    assert "/srv/out" in by_field["sandbox.writable"]
    assert "1 GiB" in by_field["sandbox.memory"]
    assert set(by_field) == {"sandbox.network", "sandbox.writable", "sandbox.memory", "sandbox.processes",
                             "constraints.timeout_seconds"}


@pytest.mark.parametrize(("text", "size"), [("256m", 256 << 20), ("1g", 1 << 30), ("512MiB", 512 << 20),
                                            ("64k", 64 << 10), (4096, 4096), ("1.5g", 3 << 29)])
def test_sizes_in_the_forms_manifests_use(text: str | int, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["lots", "-1m", "0", "1x", ""])
def test_a_size_that_is_not_one_says_the_forms(text: str) -> None:
    with pytest.raises(ValueError, match="size"):
        parse_size(text)


def test_allowed_hosts_match_exactly_by_name_port_and_subdomain() -> None:
    allowed = (check_host("API.example.com"), check_host("*.cdn.example.net:443"))
    assert host_allowed(allowed, "api.example.com", 443)
    assert host_allowed(allowed, "api.example.com.", 80)
    assert not host_allowed(allowed, "evil-api.example.com", 443)
    assert not host_allowed(allowed, "api.example.com.evil.org", 443)
    assert host_allowed(allowed, "a.cdn.example.net", 443)
    assert not host_allowed(allowed, "a.cdn.example.net", 80)
    assert not host_allowed(allowed, "cdn.example.net", 443)
    with pytest.raises(ValueError, match="not a host name"):
        check_host("http://x.org/")

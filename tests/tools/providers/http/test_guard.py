"""allowedHosts entries and the name check of HTTP tools' destination guard (no network: the request
tests are in test_guard_requests.py)."""

from __future__ import annotations

import pytest

from sidecar.errors import DestinationRefused, InvalidParams
from sidecar.tools.providers.http.guard import Destinations, parse_host_entry

pytestmark = pytest.mark.anyio


async def no_dns(host: str, port: int) -> list[str]:
    raise AssertionError(f"{host} must not be looked up")


@pytest.mark.parametrize(("entry", "kind", "port"), [
    ("api.example.com", "name", None), ("API.Example.COM.", "name", None), ("api.example.com:8443", "name", 8443),
    ("bücher.example", "name", None), ("xn--bcher-kva.example", "name", None), ("my_host.internal", "name", None),
    ("*.example.com", "wildcard", None), ("*.example.com:443", "wildcard", 443),
    ("203.0.113.7", "address", None), ("127.0.0.1:8080", "address", 8080), ("::1", "address", None),
    ("[::1]", "address", None), ("[2001:db8::7]:8443", "address", 8443),
    ("10.0.0.0/8", "network", None), ("fd00::/8", "network", None),
])
def test_entries_of_every_kind_are_read(entry: str, kind: str, port: int | None) -> None:
    rule = parse_host_entry(entry)
    assert not isinstance(rule, str), rule
    assert (rule.kind, rule.port) == (kind, port)


@pytest.mark.parametrize(("entry", "says"), [
    ("", "empty"), ("https://api.example.com", "write the host alone"), ("api.example.com/v1", "not a host"),
    ("user@api.example.com", "write the host alone"), ("api.example.com:0", "port must be a number"),
    ("api.example.com:http", "port must be a number"), ("*.com", "too broad"), ("a.*.example.com", "first label"),
    ("-bad-.example", "not a valid host name"), ("10.1.2.3/8", "did you mean 10.0.0.0/8"),
    ("[::1", "IPv6 address is written"), ("1:2:3", "not a valid IPv6"),
])
def test_a_bad_entry_says_what_to_write(entry: str, says: str) -> None:
    problem = parse_host_entry(entry)
    assert isinstance(problem, str) and says in problem, problem


def test_destinations_name_the_bad_entry() -> None:
    with pytest.raises(InvalidParams) as caught:
        Destinations(["api.example.com", "https://x.example"], where="tools[0].http.allowedHosts")
    assert caught.value.path == "tools[0].http.allowedHosts[1]"


@pytest.mark.parametrize("host", ["api.example.com", "API.EXAMPLE.COM", "api.example.com.", "Api.Example.Com."])
def test_a_listed_name_matches_in_any_case_and_with_a_trailing_dot(host: str) -> None:
    assert Destinations(["api.example.com"]).check_host(host, 443) is None


def test_idna_spellings_of_one_name_match_each_other() -> None:
    for entry in ("bücher.example", "BÜCHER.example.", "xn--bcher-kva.example"):
        Destinations([entry]).check_host("xn--bcher-kva.example", 443)
        Destinations([entry]).check_host("XN--BCHER-KVA.EXAMPLE.", 443)


@pytest.mark.parametrize(("host", "allowed"), [
    ("a.example.com", True), ("a.b.example.com", True), ("example.com", False), ("badexample.com", False),
    ("example.com.evil.test", False),
])
def test_a_wildcard_covers_names_below_it_only(host: str, allowed: bool) -> None:
    guard = Destinations(["*.example.com"])
    if allowed:
        guard.check_host(host, 443)
    else:
        with pytest.raises(DestinationRefused):
            guard.check_host(host, 443)


def test_an_entry_with_a_port_allows_that_port_only_and_says_so() -> None:
    guard = Destinations(["api.example.com:8443"])
    guard.check_host("api.example.com", 8443)
    with pytest.raises(DestinationRefused) as caught:
        guard.check_host("api.example.com", 443)
    assert "port 443 of api.example.com is not allowed" in caught.value.message
    assert caught.value.allow == "api.example.com:443"


def test_an_ip_in_a_url_must_be_listed_as_that_address() -> None:
    guard = Destinations(["localhost", "api.example.com", "[::1]"])
    for host in ("127.0.0.1", "::ffff:127.0.0.1", "::ffff:7f00:1"):
        with pytest.raises(DestinationRefused) as caught:
            guard.check_host(host, 80)
        assert "must be listed as itself" in caught.value.message
    assert str(guard.check_host("::1", 80)) == "::1"


async def test_a_name_outside_the_list_is_refused_before_any_lookup() -> None:
    guard = Destinations(["api.example.com"], resolver=no_dns, where="tools[0].http.allowedHosts")
    with pytest.raises(DestinationRefused) as caught:
        await guard.addresses("evil.example", 443)
    refused = caught.value
    assert refused.message == (
        "refused evil.example:443: host 'evil.example' is not in tools[0].http.allowedHosts (api.example.com); "
        "it was not looked up; to allow it, add 'evil.example' to tools[0].http.allowedHosts")
    assert refused.data == {"host": "evil.example", "port": 443, "address": None, "reason": "notAllowed",
                            "allow": "evil.example"}


async def test_a_metadata_address_is_allowed_by_its_literal_only() -> None:
    by_network = Destinations(["169.254.0.0/16"], resolver=no_dns)
    with pytest.raises(DestinationRefused) as caught:
        await by_network.addresses("169.254.169.254", 80)
    assert caught.value.message == (
        "refused 169.254.169.254:80: 169.254.169.254 is a cloud metadata address; to allow that address, "
        "add '169.254.169.254' to allowedHosts (a network entry does not cover a metadata address)")
    assert await by_network.addresses("169.254.1.1", 80) == ["169.254.1.1"]
    assert await Destinations(["169.254.169.254"], resolver=no_dns).addresses("169.254.169.254", 80) == [
        "169.254.169.254"]


async def test_a_literal_entry_with_a_port_allows_its_address_on_that_port_only() -> None:
    async def loopback(host: str, port: int) -> list[str]:
        return ["127.0.0.1"]

    guard = Destinations(["api.test", "127.0.0.1:8080"], resolver=loopback)
    assert await guard.addresses("api.test", 8080) == ["127.0.0.1"]
    with pytest.raises(DestinationRefused) as caught:
        await guard.addresses("api.test", 8081)
    assert caught.value.reason == "loopback" and caught.value.allow == "127.0.0.1"


async def test_every_resolved_address_is_checked_and_the_refusal_names_the_bad_one() -> None:
    async def mixed(host: str, port: int) -> list[str]:
        return ["93.184.216.34", "2606:2800:220:1::1", "::ffff:192.168.1.20", "93.184.216.34"]

    guard = Destinations(["api.example.com"], resolver=mixed)
    with pytest.raises(DestinationRefused) as caught:
        await guard.addresses("api.example.com", 443)
    refused = caught.value
    assert refused.message == (
        "refused api.example.com:443: api.example.com resolved to 3 addresses, among them ::ffff:192.168.1.20, "
        "a private address (IPv4-mapped form of 192.168.1.20, 192.168.0.0/16); "
        "to allow that address, add '::ffff:192.168.1.20' to allowedHosts")
    assert (refused.address, refused.reason) == ("::ffff:192.168.1.20", "private")

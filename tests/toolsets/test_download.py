"""The bundle downloader on its own (sidecar/toolsets/download.py), where a test needs what the app
does not let a caller choose: a DNS table (names that resolve to private addresses) and a test CA
(real HTTPS on this machine)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sidecar.errors import DestinationRefused, UpstreamError
from sidecar.toolsets.download import Downloader
from tests.http_server import HttpServer, Response
from tests.toolsets.url_bundles import bundle, serve_bundle, sha, tls_for

pytestmark = pytest.mark.anyio


class Dns:
    """A resolver that answers from a table and records what it was asked."""

    def __init__(self, table: dict[str, list[str]]) -> None:
        self.table = table
        self.asked: list[str] = []

    async def __call__(self, host: str, port: int) -> list[str]:
        self.asked.append(host)
        return self.table[host]


@pytest.fixture
def https(tmp_path: Path):  # type: ignore[no-untyped-def] -- yields (server, client context)
    server_tls, trusting = tls_for("localhost", tmp_path / "tls")
    with HttpServer("127.0.0.1", tls=server_tls) as server:
        yield server, trusting


async def test_a_bundle_comes_over_https_with_the_certificate_checked(https, tmp_path: Path) -> None:
    server, trusting = https
    data = bundle()
    path = serve_bundle(server, "/inventory.zip", data)
    url = path.replace("127.0.0.1", "localhost")
    got = await Downloader(tmp_path / "dl", verify=trusting, resolver=Dns({"localhost": ["127.0.0.1"]})).fetch(url)
    assert got is not None and (got.sha256, got.size, got.path.read_bytes()) == (sha(data), len(data), data)
    assert server.server_names == ["localhost"]
    with pytest.raises(UpstreamError, match="certificate"):  # the system's CAs do not know the test CA
        await Downloader(tmp_path / "dl", resolver=Dns({"localhost": ["127.0.0.1"]})).fetch(url)


async def test_a_redirect_from_https_to_plain_http_is_refused(https, http_server: HttpServer, tmp_path: Path) -> None:
    server, trusting = https
    serve_bundle(http_server, "/inventory.zip", bundle())
    server.route("GET", "/go", Response(302, headers={"Location": f"http://localhost:{http_server.port}/inventory.zip"}))
    with pytest.raises(DestinationRefused, match="it leaves https for plain http"):
        await Downloader(tmp_path, verify=trusting, resolver=Dns({"localhost": ["127.0.0.1"]})).fetch(
            f"https://localhost:{server.port}/go")
    assert http_server.requests == []


async def test_a_name_that_resolves_to_a_private_address_is_never_connected_to(
        http_server: HttpServer, tmp_path: Path) -> None:
    """A public-looking name (or a redirect to one) whose DNS answer is private is refused once looked
    up, before any connection: a rebinding DNS server gains nothing."""
    dns = Dns({"bundles.example.com": ["10.0.0.7"], "localhost": ["127.0.0.1"]})
    downloader = Downloader(tmp_path, resolver=dns)
    with pytest.raises(DestinationRefused) as caught:
        await downloader.fetch("https://bundles.example.com/inventory.zip")
    assert caught.value.reason == "private"
    assert "bundles.example.com:443: it resolved to 10.0.0.7, a private address (10.0.0.0/8)" in caught.value.message
    http_server.route("GET", "/go", Response(302, headers={"Location": "https://bundles.example.com/x.zip"}))
    with pytest.raises(DestinationRefused, match="it resolved to 10.0.0.7"):
        await downloader.fetch(f"http://localhost:{http_server.port}/go")
    assert dns.asked == ["bundles.example.com", "localhost", "bundles.example.com"]


async def test_loopback_is_reached_only_when_the_url_names_this_machine(http_server: HttpServer, tmp_path: Path) -> None:
    serve_bundle(http_server, "/inventory.zip", bundle())
    dns = Dns({"bundles.example.com": ["127.0.0.1"], "localhost": ["127.0.0.1"]})
    with pytest.raises(DestinationRefused) as caught:
        await Downloader(tmp_path, resolver=dns).fetch(f"https://bundles.example.com:{http_server.port}/inventory.zip")
    assert caught.value.reason == "loopback"
    got = await Downloader(tmp_path, resolver=dns).fetch(f"http://localhost:{http_server.port}/inventory.zip")
    assert got is not None and got.size == len(bundle())
    assert len(http_server.requests) == 1


async def test_a_server_that_trickles_is_cut_off_by_the_whole_downloads_deadline(
        http_server: HttpServer, tmp_path: Path) -> None:
    """Each byte comes well within the read timeout; the download as a whole does not."""
    http_server.route("GET", "/slow.zip", Response(body=bundle(), byte_delay=0.05))
    with pytest.raises(UpstreamError, match=r"took longer than 0.5 s; try again later"):
        await Downloader(tmp_path / "dl", total_timeout=0.5).fetch(f"http://127.0.0.1:{http_server.port}/slow.zip")
    assert not (tmp_path / "dl").exists() or list((tmp_path / "dl").glob("*")) == []

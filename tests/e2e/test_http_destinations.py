"""Where an HTTP tool's request may go, in the real sidecar process (issue 13, item 3): redirects to
loopback, to the metadata address and to a host not allowed end the call with an error naming the
host, the address and the allowedHosts entry that would allow it, and nothing connects there; a
name that the system resolver maps to loopback is refused until its address is listed.

The servers are real (tests/http_server.py) on 127.0.0.2 (listed, standing for a public API) and
127.0.0.1 (where a redirect must never land). The guard's debug line for each connection it opens
is how the test sees that no connection was attempted.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from sidecar.client import SidecarClient
from tests.http_server import HttpServer, Response

pytestmark = pytest.mark.anyio


@pytest.fixture
def api() -> Iterator[HttpServer]:
    with HttpServer("127.0.0.2") as server:
        yield server


@pytest.fixture
def local() -> Iterator[HttpServer]:
    with HttpServer("127.0.0.1") as server:
        server.route("*", "/admin", Response(json={"secret": "local only"}))
        yield server


async def install(sidecar: SidecarClient, tmp_path: Path, tools: list[dict[str, Any]]) -> None:
    folder = tmp_path / "dest"
    folder.mkdir(exist_ok=True)
    manifest = {"manifest_version": "1", "id": "dest", "name": "Destinations", "tools": tools}
    (folder / "toolset.yaml").write_text(yaml.safe_dump(manifest))
    await sidecar.request("toolsets/import", {"path": str(folder), "replace": True})


def tool(id_: str, url: str, allowed: list[str], follow: bool = True) -> dict[str, Any]:
    return {"id": id_, "http": {"urlTemplate": url, "allowedHosts": list(allowed), "followRedirects": follow,
                                "maxRetries": 0}}


async def call(sidecar: SidecarClient, tool_id: str) -> dict[str, Any]:
    return (await sidecar.request("tools/call", {"toolId": f"dest:{tool_id}", "args": {}}))["toolCall"]


def connections(sidecar: SidecarClient) -> list[str]:
    """Every 'host -> address' the guard connected to, from the process's debug log."""
    return re.findall(r"http: connecting to (\S+) port \d+ at (\S+)", sidecar.stderr_text())


async def test_redirects_to_loopback_metadata_or_an_unlisted_host_are_refused(sidecar: SidecarClient, api: HttpServer,
                                                                              local: HttpServer, tmp_path: Path):
    targets = {"loop": f"http://127.0.0.1:{local.port}/admin",
               "meta": "http://169.254.169.254/latest/meta-data/iam/security-credentials/",
               "evil": f"http://evil.example:{local.port}/admin"}
    for name, location in targets.items():
        api.route("GET", f"/{name}", Response(302, headers={"Location": location}))
    allowed = ["127.0.0.2", "169.254.0.0/16"]  # even a network holding it does not open the metadata address
    await install(sidecar, tmp_path, [tool(name, f"{api.url}/{name}", allowed) for name in targets])

    loop, meta, evil = [await call(sidecar, name) for name in targets]
    assert loop["status"] == "error"
    assert (f"refused 127.0.0.1:{local.port}: the address 127.0.0.1 is not in allowedHosts" in loop["error"]
            and "add '127.0.0.1' to allowedHosts" in loop["error"]), loop["error"]
    assert meta["status"] == "error"
    assert ("refused 169.254.169.254:80: 169.254.169.254 is a cloud metadata address" in meta["error"]
            and "a network entry does not cover a metadata address" in meta["error"]), meta["error"]
    assert evil["status"] == "error"
    assert "host 'evil.example' is not in allowedHosts" in evil["error"] and "not looked up" in evil["error"]

    assert [r.path for r in api.requests] == ["/loop", "/meta", "/evil"]  # each first hop went out...
    assert local.requests == []  # ...and no redirect landed on this machine's loopback server
    assert {address for _, address in connections(sidecar)} == {"127.0.0.2"}


async def test_a_name_resolving_to_loopback_is_refused_until_its_address_is_listed(sidecar: SidecarClient,
                                                                                   local: HttpServer, tmp_path: Path):
    url = f"http://localhost:{local.port}/admin"  # resolved by the system's getaddrinfo
    await install(sidecar, tmp_path, [tool("named", url, ["localhost"]),
                                      tool("listed", url, ["localhost", "127.0.0.1", "::1"])])
    refused = await call(sidecar, "named")
    assert refused["status"] == "error"
    assert re.search(r"localhost resolved to .*(127\.0\.0\.1|::1), a loopback address", refused["error"]), \
        refused["error"]
    assert local.requests == []

    reached = await call(sidecar, "listed")
    assert (reached["status"], reached["result"]) == ("success", {"secret": "local only"})
    assert local.requests[0].header("host") == f"localhost:{local.port}"  # the name, not the address


async def test_a_redirect_to_another_allowed_host_carries_none_of_the_tools_headers(
        sidecar: SidecarClient, api: HttpServer, tmp_path: Path):
    key = "dest-api-key-7Rq2Wm9Xc4Lp"
    with HttpServer("127.0.0.3") as other:
        other.route("GET", "/landing", Response(json={"landed": True}))
        api.route("GET", "/start", Response(302, headers={"Location": f"{other.url}/landing"}))
        api.route("GET", "/near", Response(302, headers={"Location": f"{api.url}/landing"}))
        api.route("GET", "/landing", Response(json={"landed": True}))
        await sidecar.request("secrets/set", {"name": "DEST_KEY", "value": key})
        headers = {"X-Api-Key": "${DEST_KEY}", "Accept": "application/json"}
        made = [tool(name, f"{api.url}/{name}", ["127.0.0.2", "127.0.0.3"]) for name in ("start", "near")]
        for t in made:
            t["http"]["headers"] = dict(headers)
        await install(sidecar, tmp_path, made)

        far, near = await call(sidecar, "start"), await call(sidecar, "near")
        assert far["status"] == "success" and far["result"] == {"landed": True}, far
        assert near["status"] == "success", near
        [first] = api.requests_to("/start")
        [landed] = other.requests_to("/landing")
        assert first.header("X-Api-Key") == key
        # The key was for the host the tool addressed; the next origin gets only neutral headers.
        assert landed.header("X-Api-Key") is None and landed.header("Accept") == "application/json"
        [same_origin] = api.requests_to("/landing")
        assert same_origin.header("X-Api-Key") == key  # a redirect within the origin keeps them

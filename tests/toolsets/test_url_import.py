"""toolsets/import {url}, toolsets/checkUpdate and toolsets/upgrade through the app, against a real
local HTTP server (tests/http_server.py): what gets installed, what is refused and that a refusal
installs nothing."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from sidecar.client import RemoteError, SidecarClient
from tests.http_server import HttpServer, Response
from tests.toolsets.url_bundles import bundle, serve_bundle, sha

pytestmark = pytest.mark.anyio

INVALID_PARAMS, NOT_FOUND, CONFLICT, PERMISSION_DENIED, INVALID_BUNDLE, UPSTREAM = (
    -32602, -32010, -32011, -32012, -32013, -32020)
KEY = "inv-key-5c1e9a7b3d"
LIMIT = 1 << 20  # the app below downloads at most 1 MiB, so a refused body costs little


@pytest.fixture
async def app(data_dir: Path) -> AsyncIterator[SidecarClient]:
    async with SidecarClient.in_process(data_dir, secrets_backend="file", max_bundle_bytes=LIMIT) as client:
        yield client
    assert client.proc.returncode == 0


async def refused(app: SidecarClient, method: str, params: dict[str, Any], code: int) -> RemoteError:
    with pytest.raises(RemoteError) as caught:
        await app.request(method, params)
    assert caught.value.code == code, caught.value
    return caught.value


async def nothing_installed(app: SidecarClient, data_dir: Path) -> None:
    toolsets = (await app.request("toolsets/list"))["toolsets"]
    assert [t["id"] for t in toolsets if not t["userMcp"]] == []
    assert list((data_dir / "downloads").glob("*")) == []  # the download went with the refusal
    assert not (data_dir / "toolsets" / "inventory").exists()


async def test_a_bundle_is_installed_from_its_url_which_is_kept_as_its_source(
        app: SidecarClient, http_server: HttpServer, data_dir: Path) -> None:
    data = bundle()
    url = serve_bundle(http_server, "/dl/inventory.zip", data)
    toolset = (await app.request("toolsets/import", {"url": url, "sha256": sha(data).upper()}))["toolset"]
    assert (toolset["id"], toolset["version"], toolset["sourceType"], toolset["sourceRef"]) == \
        ("inventory", "1.0.0", "url", url)
    tools = (await app.request("toolsets/get", {"id": "inventory"}))["tools"]
    assert [t["id"] for t in tools] == ["inventory:get_item"]
    assert list((data_dir / "downloads").glob("*")) == []
    assert http_server.requests[0].header("Accept-Encoding") == "identity"


async def test_the_download_reports_progress_under_the_callers_token(
        app: SidecarClient, http_server: HttpServer) -> None:
    data = bundle(filler=900_000)  # stored, not compressed: the body is about 900 KB
    url = serve_bundle(http_server, "/big.zip", data)
    await app.request("toolsets/import", {"url": url, "workDoneToken": "dl-1"})
    reports = [n["params"]["value"] for n in app.notifications
               if n["method"] == "$/progress" and n["params"]["token"] == "dl-1"]
    assert len(reports) >= 3
    assert reports[-1] == {"kind": "report", "message": f"downloaded {len(data)} bytes", "percentage": 100}
    assert [r["percentage"] for r in reports] == sorted(r["percentage"] for r in reports)


async def test_check_update_asks_with_the_etag_and_upgrade_keeps_overrides_config_and_secrets(
        app: SidecarClient, http_server: HttpServer) -> None:
    v1 = bundle("1.0.0")
    url = serve_bundle(http_server, "/inventory.zip", v1, etag='"v1"')
    await app.request("toolsets/import", {"url": url})
    await app.request("config/set", {"toolsetId": "inventory", "values": {"api_key": KEY, "api_host": "inv.test"}})
    await app.request("tools/setOverride", {"toolsetId": "inventory", "toolId": "inventory:get_item",
                                            "nameOverride": "Look up an item"})

    same = await app.request("toolsets/checkUpdate", {"id": "inventory"})
    assert same == {"toolsetId": "inventory", "url": url, "updateAvailable": False, "currentVersion": "1.0.0",
                    "currentSha256": sha(v1), "notModified": True}
    assert http_server.requests[-1].header("If-None-Match") == '"v1"'

    v2 = bundle("2.0.0", extra_tool=True)
    serve_bundle(http_server, "/inventory.zip", v2, etag='"v2"')
    newer = await app.request("toolsets/checkUpdate", {"id": "inventory"})
    assert (newer["updateAvailable"], newer["availableVersion"], newer["availableSha256"]) == (True, "2.0.0", sha(v2))
    assert (await app.request("toolsets/get", {"id": "inventory"}))["toolset"]["version"] == "1.0.0"  # only asked

    done = await app.request("toolsets/upgrade", {"id": "inventory", "sha256": sha(v2)})
    assert (done["upgraded"], done["previousVersion"], done["toolset"]["version"]) == (True, "1.0.0", "2.0.0")
    assert done["toolset"]["sourceRef"] == url
    detail = await app.request("toolsets/get", {"id": "inventory"})
    names = {t["id"]: t["name"] for t in detail["tools"]}
    assert names == {"inventory:get_item": "Look up an item", "inventory:list_items": "list_items"}
    config = await app.request("config/get", {"toolsetId": "inventory"})
    assert {f["key"]: f.get("value") for f in config["fields"]} == {"api_host": "inv.test", "api_key": "****"}
    assert config["status"] != "available"  # the secret is still set: nothing is missing

    again = await app.request("toolsets/upgrade", {"id": "inventory"})
    assert (again["upgraded"], again["toolset"]["version"]) == (False, "2.0.0")
    assert (await app.request("toolsets/checkUpdate", {"id": "inventory"}))["updateAvailable"] is False


async def test_an_upgrade_whose_bundle_became_another_toolset_changes_nothing(
        app: SidecarClient, http_server: HttpServer) -> None:
    url = serve_bundle(http_server, "/inventory.zip", bundle("1.0.0"))
    await app.request("toolsets/import", {"url": url})
    serve_bundle(http_server, "/inventory.zip", bundle("9.0.0", toolset_id="someone_else"))
    error = await refused(app, "toolsets/upgrade", {"id": "inventory"}, INVALID_BUNDLE)
    assert "is now the toolset 'someone_else', not 'inventory'" in error.message
    ids = [t["id"] for t in (await app.request("toolsets/list"))["toolsets"]]
    assert "someone_else" not in ids
    assert (await app.request("toolsets/get", {"id": "inventory"}))["toolset"]["version"] == "1.0.0"


async def test_a_sha256_mismatch_installs_nothing(app: SidecarClient, http_server: HttpServer, data_dir: Path) -> None:
    url = serve_bundle(http_server, "/inventory.zip", bundle())
    error = await refused(app, "toolsets/import", {"url": url, "sha256": "0" * 64}, INVALID_PARAMS)
    assert error.data["path"] == "params.sha256"
    assert f"has sha256 {sha(bundle())}, not {'0' * 64}" in error.message
    await nothing_installed(app, data_dir)
    bad = await refused(app, "toolsets/import", {"url": url, "sha256": "abc"}, INVALID_PARAMS)
    assert "64 hexadecimal digits" in bad.message


async def test_a_redirect_to_a_file_url_is_refused(app: SidecarClient, http_server: HttpServer, data_dir: Path) -> None:
    http_server.route("GET", "/go", Response(302, headers={"Location": "file:///etc/passwd"}))
    error = await refused(app, "toolsets/import", {"url": http_server.url + "/go"}, PERMISSION_DENIED)
    assert "to file:///etc/passwd: only https redirects are followed" in error.message
    await nothing_installed(app, data_dir)


@pytest.mark.parametrize(("target", "reason", "words"), [
    ("https://10.1.2.3/inventory.zip", "private", "10.1.2.3:443: it is a private address (10.0.0.0/8)"),
    ("https://169.254.169.254/latest/meta-data", "metadata", "it is a cloud metadata address"),
    ("https://[::ffff:192.168.1.1]/x.zip", "private", "IPv4-mapped form of 192.168.1.1"),
])
async def test_a_redirect_to_a_private_address_is_refused_before_connecting(
        app: SidecarClient, http_server: HttpServer, data_dir: Path, target: str, reason: str, words: str) -> None:
    http_server.route("GET", "/go", Response(307, headers={"Location": target}))
    error = await refused(app, "toolsets/import", {"url": http_server.url + "/go"}, PERMISSION_DENIED)
    assert error.data["reason"] == reason
    assert words in error.message
    assert "bundles are downloaded only from public addresses" in error.message
    await nothing_installed(app, data_dir)


async def test_a_redirect_to_another_port_of_this_machine_by_another_name_is_refused(
        app: SidecarClient, http_server: HttpServer) -> None:
    """Loopback is allowed for the host the user wrote, not for where a redirect points."""
    http_server.route("GET", "/go", Response(302, headers={"Location": f"http://127.0.0.2:{http_server.port}/x"}))
    error = await refused(app, "toolsets/import", {"url": http_server.url + "/go"}, PERMISSION_DENIED)
    assert error.data["reason"] == "scheme"
    http_server.route("GET", "/go", Response(302, headers={"Location": f"https://127.0.0.2:{http_server.port}/x"}))
    error = await refused(app, "toolsets/import", {"url": http_server.url + "/go"}, PERMISSION_DENIED)
    assert error.data["reason"] == "loopback"


async def test_redirects_are_followed_a_few_times_only(app: SidecarClient, http_server: HttpServer) -> None:
    url = serve_bundle(http_server, "/inventory.zip", bundle())
    http_server.route("GET", "/old", Response(308, headers={"Location": "/inventory.zip"}))
    toolset = (await app.request("toolsets/import", {"url": http_server.url + "/old"}))["toolset"]
    assert toolset["sourceRef"] == http_server.url + "/old"  # what the user gave, followed again by checkUpdate
    assert [r.path for r in http_server.requests] == ["/old", "/inventory.zip"]
    http_server.route("GET", "/loop", Response(302, headers={"Location": "/loop"}))
    error = await refused(app, "toolsets/import", {"url": http_server.url + "/loop", "replace": True}, UPSTREAM)
    assert "redirected more than 5 times" in error.message
    assert len(http_server.requests_to("/loop")) == 6


async def test_a_huge_body_is_refused_by_its_length_without_reading_it(
        app: SidecarClient, http_server: HttpServer, data_dir: Path) -> None:
    http_server.route("GET", "/huge.zip", Response(size=2 << 30, headers={"Content-Type": "application/zip"}))
    error = await refused(app, "toolsets/import", {"url": http_server.url + "/huge.zip"}, INVALID_BUNDLE)
    assert "is 2.0 GB; a bundle may be at most 1.0 MB" in error.message
    assert http_server.aborted.wait(5)  # we hung up with the body unsent
    await nothing_installed(app, data_dir)


async def test_a_body_without_a_length_stops_at_the_limit(
        app: SidecarClient, http_server: HttpServer, data_dir: Path) -> None:
    http_server.route("GET", "/endless.zip", Response(forever=True))
    error = await refused(app, "toolsets/import", {"url": http_server.url + "/endless.zip"}, INVALID_BUNDLE)
    assert "sent more than 1.0 MB; a bundle may be at most 1.0 MB" in error.message
    assert http_server.aborted.wait(5)
    await nothing_installed(app, data_dir)


async def test_a_body_that_is_not_a_zip_is_an_invalid_bundle(
        app: SidecarClient, http_server: HttpServer, data_dir: Path) -> None:
    http_server.route("GET", "/page", Response(body="<html>Download our toolset!</html>",
                                               headers={"Content-Type": "text/html"}))
    error = await refused(app, "toolsets/import", {"url": http_server.url + "/page"}, INVALID_BUNDLE)
    assert "served (text/html) is not a ZIP file" in error.message
    await nothing_installed(app, data_dir)


async def test_an_unreachable_server_and_an_error_status_are_upstream_errors(
        app: SidecarClient, http_server: HttpServer, data_dir: Path) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    error = await refused(app, "toolsets/import", {"url": f"http://127.0.0.1:{port}/x.zip"}, UPSTREAM)
    assert f"cannot download http://127.0.0.1:{port}/x.zip" in error.message
    http_server.route("GET", "/gone.zip", Response(404))
    error = await refused(app, "toolsets/import", {"url": http_server.url + "/gone.zip"}, UPSTREAM)
    assert "answered 404 Not Found" in error.message
    await nothing_installed(app, data_dir)


@pytest.mark.parametrize(("params", "path", "words"), [
    ({"url": "http://downloads.example.com/t.zip"}, "params.url", "is plain http"),
    ({"url": "ftp://downloads.example.com/t.zip"}, "params.url", "give the https:// address"),
    ({"url": "file:///tmp/t.zip"}, "params.url", "give the https:// address"),
    ({"url": "https://me:hunter2@downloads.example.com/t.zip"}, "params.url", "remove the user name and password"),
    ({"url": "https://downloads.example.com/t.zip?token=ghp_abcdefabcdefabcdefabcdefabcdefabcd"}, "params.url",
     "looks like a credential"),
    ({"url": "https://downloads.example.com/t.zip", "path": "/tmp/t.zip"}, "params", "give either path"),
    ({}, "params", "give either path"),
    ({"path": "/tmp/t.zip", "sha256": "0" * 64}, "params.sha256", "give it with url"),
])
async def test_bad_urls_are_refused_before_anything_is_sent(
        app: SidecarClient, params: dict[str, Any], path: str, words: str) -> None:
    error = await refused(app, "toolsets/import", params, INVALID_PARAMS)
    assert error.data["path"] == path
    assert words in error.message
    assert "hunter2" not in error.message and "ghp_abc" not in error.message


async def test_check_update_and_upgrade_need_a_toolset_installed_from_a_url(
        app: SidecarClient, tmp_path: Path) -> None:
    local = tmp_path / "inventory.zip"
    local.write_bytes(bundle())
    await app.request("toolsets/import", {"path": str(local)})
    error = await refused(app, "toolsets/checkUpdate", {"id": "inventory"}, CONFLICT)
    assert "was not installed from a URL (its source is zip)" in error.message
    await refused(app, "toolsets/upgrade", {"id": "inventory"}, CONFLICT)
    await refused(app, "toolsets/checkUpdate", {"id": "nope"}, NOT_FOUND)


async def test_a_server_that_starts_giving_an_etag_is_then_asked_conditionally(
        app: SidecarClient, http_server: HttpServer) -> None:
    data = bundle()
    url = serve_bundle(http_server, "/inventory.zip", data)
    await app.request("toolsets/import", {"url": url})
    serve_bundle(http_server, "/inventory.zip", data, etag='"late"')
    first = await app.request("toolsets/checkUpdate", {"id": "inventory"})
    assert (first["updateAvailable"], "notModified" in first) == (False, False)  # downloaded and compared
    second = await app.request("toolsets/checkUpdate", {"id": "inventory"})
    assert (second["updateAvailable"], second["notModified"]) == (False, True)
    assert [r.header("If-None-Match") for r in http_server.requests] == [None, None, '"late"']


async def test_a_file_import_over_a_url_toolset_stops_following_the_url(
        app: SidecarClient, http_server: HttpServer, tmp_path: Path) -> None:
    url = serve_bundle(http_server, "/inventory.zip", bundle("1.0.0"))
    await app.request("toolsets/import", {"url": url})
    local = tmp_path / "inventory.zip"
    local.write_bytes(bundle("1.5.0"))
    toolset = (await app.request("toolsets/import", {"path": str(local), "replace": True}))["toolset"]
    assert (toolset["sourceType"], toolset["sourceRef"], toolset["version"]) == ("zip", str(local), "1.5.0")
    await refused(app, "toolsets/checkUpdate", {"id": "inventory"}, CONFLICT)
    back = (await app.request("toolsets/import", {"url": url, "replace": True}))["toolset"]
    assert (back["sourceType"], back["version"]) == ("url", "1.0.0")
    assert (await app.request("toolsets/checkUpdate", {"id": "inventory"}))["updateAvailable"] is False

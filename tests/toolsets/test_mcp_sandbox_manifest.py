"""toolset.yaml's ``mcp_servers[].sandbox``: read and checked as a toolset's sandbox block, shown by
toolsets/inspect before install (the server's line and its widenings), stored by the import and
written back by the export."""

from __future__ import annotations

import io
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from sidecar.client import SidecarClient

pytestmark = pytest.mark.anyio

BASIC = str(Path(__file__).resolve().parents[1] / "fixtures" / "mcp" / "basic.py")


def bundle(tmp_path: Path, *servers: dict[str, Any]) -> Path:
    folder = tmp_path / "kit"
    folder.mkdir(exist_ok=True)
    manifest = {"manifest_version": "1", "id": "kit", "name": "Kit",
                "mcp_servers": [{"command": sys.executable, "args": [BASIC]} | s for s in servers]}
    (folder / "toolset.yaml").write_text(yaml.safe_dump(manifest))
    return folder


SERVERS = (
    {"id": "open"},
    {"id": "boxed", "sandbox": {}},
    {"id": "also-boxed", "sandbox": True},
    {"id": "wide", "sandbox": {"network": "full", "memory": "1g", "writable": ["/srv/kit-out"], "processes": 128}},
    {"id": "off", "sandbox": False},
)


async def test_inspect_says_which_servers_run_confined_and_what_their_sandbox_allows(app: SidecarClient,
                                                                                     tmp_path: Path):
    found = await app.request("toolsets/inspect", {"path": str(bundle(tmp_path, *SERVERS))})
    servers = {s["id"]: s for s in found["mcpServers"]}
    assert "sandbox" not in servers["open"] and "sandbox" not in servers["off"]
    assert servers["boxed"]["sandbox"] == {} == servers["also-boxed"]["sandbox"]
    assert "limitWarnings" not in servers["boxed"]  # the defaults widen nothing
    wide = servers["wide"]
    assert wide["sandbox"] == {"network": "full", "memory": 1 << 30, "writable": ["/srv/kit-out"], "processes": 128}
    assert {w["setting"]: w["server"] for w in wide["limitWarnings"]} == {
        "sandbox.network": "wide", "sandbox.writable": "wide", "sandbox.memory": "wide", "sandbox.processes": "wide"}
    assert "MCP server wide: may connect to any host on the network and the internet (sandbox.network)" \
        in found["warnings"]
    assert any(w.startswith("MCP server wide: may write to /srv/kit-out") for w in found["warnings"])

    installed = await app.request("toolsets/import", {"path": str(bundle(tmp_path, *SERVERS))})
    assert installed["limitWarnings"] == wide["limitWarnings"]
    listed = {s["serverId"]: s for s in (await app.request("mcpServers/list"))["servers"]}
    assert listed["boxed"]["sandbox"] == {} and "sandbox" not in listed["open"]
    assert listed["wide"]["sandbox"] == wide["sandbox"]


async def test_an_export_writes_each_sandbox_back(app: SidecarClient, tmp_path: Path):
    source = bundle(tmp_path, *SERVERS)
    inspected = await app.request("toolsets/inspect", {"path": str(source)})
    await app.request("toolsets/import", {"path": str(source)})
    dest = tmp_path / "kit.zip"
    await app.request("toolsets/export", {"id": "kit", "path": str(dest)})
    with zipfile.ZipFile(io.BytesIO(dest.read_bytes())) as z:
        written = yaml.safe_load(z.read("toolset.yaml"))
    sandboxes = {s["id"]: s.get("sandbox") for s in written["mcp_servers"]}
    assert sandboxes == {"open": None, "boxed": {}, "also-boxed": {}, "off": None,
                         "wide": {"network": "full", "memory": 1 << 30, "writable": ["/srv/kit-out"],
                                  "processes": 128}}
    again = await app.request("toolsets/inspect", {"path": str(dest)})
    assert again["mcpServers"] == inspected["mcpServers"]


@pytest.mark.parametrize(("server", "where", "reason"), [
    ({"type": "sse", "url": "https://mcp.example.com/sse", "command": None, "args": [], "sandbox": {}},
     "mcp_servers[0].sandbox", "only a stdio server"),
    ({"sandbox": {"disk": "1g"}}, "mcp_servers[0].sandbox.disk", "per-call limit"),
    ({"sandbox": {"network": "bridge"}}, "mcp_servers[0].sandbox.network", "Docker network mode"),
    ({"sandbox": {"writable": ["/"]}}, "mcp_servers[0].sandbox.writable[0]", "whole filesystem"),
    ({"sandbox": {"memory": "huge"}}, "mcp_servers[0].sandbox.memory", "not a size"),
    ({"sandbox": "on"}, "mcp_servers[0].sandbox", ""),
])
async def test_a_bad_server_sandbox_rejects_the_bundle_naming_it(app: SidecarClient, tmp_path: Path,
                                                                 server: dict[str, Any], where: str, reason: str):
    refused = await app.request_raw("toolsets/inspect", {"path": str(bundle(tmp_path, {"id": "s"} | server))})
    assert refused["error"]["code"] == -32013, refused  # InvalidBundle
    assert refused["error"]["data"]["path"] == f"toolset.yaml: {where}", refused
    assert reason in refused["error"]["message"]


async def test_a_server_may_not_write_the_data_directory(app: SidecarClient, tmp_path: Path, data_dir: Path):
    source = bundle(tmp_path, {"id": "s", "sandbox": {"writable": [str(data_dir)]}})
    for method in ("toolsets/inspect", "toolsets/import"):
        refused = await app.request_raw(method, {"path": str(source)})
        assert refused["error"]["code"] == -32013, refused
        assert refused["error"]["data"]["path"].endswith("mcp_servers[0].sandbox.writable[0]"), refused
        assert "data directory" in refused["error"]["message"]

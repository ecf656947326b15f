"""mcpServers/add and update's ``sandbox``: what a user may write, and what is refused with the field
named and what to write instead (the same checks as a toolset's sandbox block)."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest

from sidecar.client import SidecarClient

pytestmark = pytest.mark.anyio

BASIC = str(Path(__file__).resolve().parents[1] / "fixtures" / "mcp" / "basic.py")


async def added(app: SidecarClient, **extra: Any) -> dict[str, Any]:
    params = {"id": "s", "command": sys.executable, "args": [BASIC]} | extra
    return (await app.request("mcpServers/add", params))["server"]


@pytest.mark.parametrize(("sandbox", "path", "reason"), [
    ({"memory": "lots"}, "params.sandbox.memory", "not a size"),
    ({"memory": "8m"}, "params.sandbox.memory", "out of range"),
    ({"processes": 0}, "params.sandbox.processes", "from 1 to 4096"),
    ({"network": "bridge"}, "params.sandbox.network", ""),
    ({"network": "full", "allowedHosts": ["api.example.com"]}, "params.sandbox.allowedHosts",
     "set network: allowedHosts"),
    ({"allowedHosts": ["not a host!"]}, "params.sandbox.allowedHosts[0]", "is not a host name"),
    ({"writable": ["/"]}, "params.sandbox.writable[0]", "whole filesystem"),
    ({"writable": ["relative/out"]}, "params.sandbox.writable[0]", "is relative"),
    ({"writable": ["~/out"]}, "params.sandbox.writable[0]", "'~' is not expanded"),
    ({"disk": "1g"}, "params.sandbox", "unknown field `disk`"),  # a per-call limit of Python tools
    ({"timeoutSeconds": 5}, "params.sandbox", "unknown field `timeoutSeconds`"),  # a server has callTimeout
    ("yes", "params.sandbox", ""),
])
async def test_a_bad_sandbox_is_refused_naming_the_setting(app: SidecarClient, sandbox: Any, path: str,
                                                            reason: str):
    for method, params in (("mcpServers/add", {"id": "s", "command": sys.executable, "args": [BASIC],
                                                "sandbox": sandbox}),
                           ("mcpServers/update", {"id": "kept", "sandbox": sandbox})):
        if method == "mcpServers/update" and not (await app.request("mcpServers/list"))["servers"]:
            await added(app, id="kept")
        refused = await app.request_raw(method, params)
        assert refused["error"]["code"] == -32602, refused
        assert refused["error"]["data"]["path"] == path, refused
        assert reason in refused["error"]["message"], refused
    servers = (await app.request("mcpServers/list"))["servers"]
    assert [(s["id"], s.get("sandbox")) for s in servers] == [("kept~kept", None)]  # nothing stored


async def test_the_data_directory_is_no_writable_folder_of_a_server(app: SidecarClient, data_dir: Path):
    refused = await app.request_raw("mcpServers/add", {"id": "s", "command": sys.executable, "args": [BASIC],
                                                       "sandbox": {"writable": [str(data_dir / "chats")]}})
    assert refused["error"]["data"]["path"] == "params.sandbox.writable[0]"
    assert "data directory" in refused["error"]["message"]


async def test_only_a_stdio_server_can_be_sandboxed(app: SidecarClient):
    refused = await app.request_raw("mcpServers/add", {"id": "r", "type": "sse", "url": "https://mcp.example.com/sse",
                                                       "sandbox": {}})
    assert refused["error"]["code"] == -32602
    assert refused["error"]["data"]["path"] == "params.sandbox"
    assert "only a stdio server" in refused["error"]["message"]

    # A sandboxed server made remote loses its sandbox with its command; asking for both is refused.
    await added(app, sandbox={"network": "full"})
    both = await app.request_raw("mcpServers/update", {"id": "s", "type": "sse", "url": "https://mcp.example.com/sse",
                                                       "sandbox": {}})
    assert both["error"]["data"]["path"] == "params.sandbox"
    remote = (await app.request("mcpServers/update", {"id": "s", "type": "sse",
                                                      "url": "https://mcp.example.com/sse"}))["server"]
    assert "sandbox" not in remote and remote["type"] == "sse"


async def test_the_block_is_kept_as_given_sizes_in_bytes_and_update_replaces_it_whole(app: SidecarClient):
    server = await added(app, sandbox={"memory": "512m", "allowedHosts": ["API.example.com"],
                                       "writable": ["/srv/out/"], "processes": 8})
    want = {"memory": 512 << 20, "network": "allowedHosts", "allowedHosts": ["api.example.com"],
            "writable": ["/srv/out"], "processes": 8}
    assert server["sandbox"] == want
    assert (await app.request("toolsets/get", {"id": "s"}))["mcpServers"][0]["sandbox"] == want

    same = (await app.request("mcpServers/update", {"id": "s", "requiresConfirmation": True}))["server"]
    assert same["sandbox"] == want  # absent: unchanged
    whole = (await app.request("mcpServers/update", {"id": "s", "sandbox": {"network": "full"}}))["server"]
    assert whole["sandbox"] == {"network": "full"}
    defaults = (await app.request("mcpServers/update", {"id": "s", "sandbox": {}}))["server"]
    assert defaults["sandbox"] == {}
    off = (await app.request("mcpServers/update", {"id": "s", "sandbox": None}))["server"]
    assert "sandbox" not in off


async def test_a_toolsets_server_takes_its_sandbox_from_the_manifest_only(app: SidecarClient, tmp_path: Path):
    bundle = tmp_path / "kit"
    bundle.mkdir()
    (bundle / "toolset.yaml").write_text(
        f"manifest_version: '1'\nid: kit\nname: Kit\nmcp_servers:\n"
        f"  - id: srv\n    command: {sys.executable}\n    args: [{BASIC}]\n    sandbox: {{}}\n")
    await app.request("toolsets/import", {"path": str(bundle)})
    refused = await app.request_raw("mcpServers/update", {"id": "kit~srv", "sandbox": None})
    assert refused["error"]["code"] == -32011 and "manifest" in refused["error"]["message"]
    assert (await app.request("toolsets/get", {"id": "kit"}))["mcpServers"][0]["sandbox"] == {}


async def test_a_row_of_the_older_sandboxed_option_is_shown_and_edited_as_the_block_it_means(data_dir: Path):
    async with SidecarClient.in_process(data_dir, secrets_backend="file") as sc:
        await added(sc, id="old")
    with sqlite3.connect(data_dir / "sidecar.db") as db:
        db.execute("UPDATE toolset_mcp_servers SET options = ? WHERE id = 'old'", (json.dumps({"sandboxed": True}),))
    async with SidecarClient.in_process(data_dir, secrets_backend="file") as sc:
        shown = (await sc.request("mcpServers/list"))["servers"][0]
        assert shown["sandbox"] == {"network": "full"}  # what it ran with: confined, with the network
        await sc.request("mcpServers/update", {"id": "old", "callTimeout": 30})
    with sqlite3.connect(data_dir / "sidecar.db") as db:
        (options,) = db.execute("SELECT options FROM toolset_mcp_servers WHERE id = 'old'").fetchone()
    assert json.loads(options) == {"call_timeout": 30.0, "sandbox": {"network": "full"}}

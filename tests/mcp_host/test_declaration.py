"""One MCP-server declaration (`api.mcp.ServerDecl`): mcpServers/add and a toolset.yaml's
``mcp_servers[]`` entry refuse the same bad servers, each with its own error (InvalidParams naming
``params.<camelCase>`` for the wire, InvalidBundle naming ``mcp_servers[0].<snake_case>`` inside the
bundle for a manifest), and accept the same good ones; mcpServers/update's params name the same fields."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest
import yaml

from sidecar.api.base import wire_name
from sidecar.api.mcp import AddParams, ServerDecl, UpdateParams
from sidecar.client import SidecarClient
from sidecar.mcp_host import edits
from sidecar.toolsets.manifest import McpServerDecl

pytestmark = pytest.mark.anyio

NOWHERE = "covalt-test-no-such-program"  # accepted as a command; fails at connect, spawning nothing
REMOTE = {"type": "streamable-http", "url": "http://127.0.0.1:1/mcp", "command": None}

# A server (over a stdio one running NOWHERE), the field refused and what follows it in the path.
BAD: list[tuple[dict[str, Any], str, str]] = [
    ({"id": "no spaces"}, "id", ""),
    ({"id": "x" * 65}, "id", ""),
    ({"type": "websocket"}, "type", ""),
    ({"command": 5}, "command", ""),
    ({"command": "c" * 4097}, "command", ""),
    ({"args": "--one --two"}, "args", ""),
    ({"args": ["a"] * 1025}, "args", ""),
    ({"args": ["a" * (32 * 1024 + 1)]}, "args", "[0]"),
    ({"env": {"A=B": "1"}}, "env", ""),
    ({"env": {"A": 1}}, "env", "[...]"),
    ({"env": {"A": "v" * (32 * 1024 + 1)}}, "env", "[...]"),
    ({"env": {f"V{i}": "1" for i in range(1025)}}, "env", ""),
    ({"cwd": ""}, "cwd", ""),
    ({**REMOTE, "headers": {"Bad Name": "1"}}, "headers", ""),
    ({**REMOTE, "headers": {"X-Injected": "a\r\nEvil: 1"}}, "headers", "[...]"),
    ({**REMOTE, "headers": {f"X-{i}": "1" for i in range(129)}}, "headers", ""),
    ({**REMOTE, "url": "https://h/" + "p" * 8192}, "url", ""),
    ({"requires_confirmation": "yes"}, "requires_confirmation", ""),
    ({"connect_timeout": 0}, "connect_timeout", ""),
    ({"connect_timeout": 601}, "connect_timeout", ""),
    ({"call_timeout": -1}, "call_timeout", ""),
    ({"call_timeout": 3601}, "call_timeout", ""),
    ({"log_level": "verbose"}, "log_level", ""),
    ({"sandbox": "on"}, "sandbox", ""),
    ({"sandbox": {"processes": 0}}, "sandbox", ".processes"),
    ({"sandbox": {"memory": "8m"}}, "sandbox", ".memory"),
    ({"sandbox": {"writable": ["/"]}}, "sandbox", ".writable[0]"),
    ({"command": None}, "command", ""),  # a stdio server needs one
    ({**REMOTE, "url": "ftp://files.example.com"}, "url", ""),
    ({**REMOTE, "command": "also-a-program"}, "command", ""),
    ({**REMOTE, "sandbox": {}}, "sandbox", ""),  # only a stdio server runs confined
]

GOOD: list[dict[str, Any]] = [
    {},
    {"args": ["--flag", "${TOKEN}"], "env": {"LOG_LEVEL": "debug", "lower.name-ok": "1"}, "cwd": "/tmp"},
    {"connect_timeout": 600, "call_timeout": 3600, "log_level": "warning", "requires_confirmation": True},
    {"sandbox": {}},
    {"sandbox": {"memory": "512m", "network": "allowedHosts", "allowedHosts": ["api.example.com"],
                 "processes": 8}},
    {**REMOTE, "headers": {"Authorization": "Bearer ${API_TOKEN}", "X-Trace": "on"}},
]


def _wire(server: dict[str, Any]) -> dict[str, Any]:
    return {wire_name(k): v for k, v in ({"id": "srv", "command": NOWHERE} | server).items()}


def _manifest(tmp_path: Path, n: int, server: dict[str, Any]) -> str:
    folder = tmp_path / f"kit{n}"
    folder.mkdir()
    entry = {"id": "srv", "command": NOWHERE} | server
    (folder / "toolset.yaml").write_text(yaml.safe_dump(
        {"manifest_version": "1", "id": "kit", "name": "Kit", "mcp_servers": [entry]}))
    return str(folder)


async def test_the_wire_and_a_manifest_refuse_the_same_servers_each_naming_the_field(app: SidecarClient,
                                                                                     tmp_path: Path):
    for n, (server, field, rest) in enumerate(BAD):
        wire = await app.request_raw("mcpServers/add", _wire(server))
        assert wire.get("error", {}).get("code") == -32602, (server, wire)  # InvalidParams
        assert wire["error"]["data"]["path"] == f"params.{wire_name(field)}{rest}", (server, wire)
        bundle = await app.request_raw("toolsets/inspect", {"path": _manifest(tmp_path, n, server)})
        assert bundle.get("error", {}).get("code") == -32013, (server, bundle)  # InvalidBundle
        assert bundle["error"]["data"]["path"] == f"toolset.yaml: mcp_servers[0].{field}{rest}", (server, bundle)
    assert (await app.request("mcpServers/list"))["servers"] == []  # nothing was added


async def test_the_wire_and_a_manifest_accept_the_same_servers(app: SidecarClient, tmp_path: Path):
    for n, server in enumerate(GOOD):
        inspected = await app.request_raw("toolsets/inspect", {"path": _manifest(tmp_path, n, server)})
        assert "result" in inspected, (server, inspected)
        added = await app.request_raw("mcpServers/add", _wire(server) | {"id": f"srv{n}"})
        assert "result" in added, (server, added)
        assert (await app.request("mcpServers/remove", {"id": f"srv{n}"})) == {}


async def test_a_manifest_writes_the_keys_in_snake_case_only(app: SidecarClient, tmp_path: Path):
    refused = await app.request_raw("toolsets/inspect", {"path": _manifest(tmp_path, 0, {"callTimeout": 5})})
    assert refused["error"]["code"] == -32013
    assert refused["error"]["data"]["path"] == "toolset.yaml: mcp_servers[0].callTimeout"
    assert "call_timeout" in refused["error"]["message"]


def test_one_field_list_for_add_update_the_manifest_and_the_store():
    declared = set(ServerDecl.__struct_fields__)
    assert set(AddParams.__struct_fields__) == declared
    assert set(McpServerDecl.__struct_fields__) == declared | {"tool_output"}
    # mcpServers/update names each field again (optional there): the two lists may not drift.
    assert set(UpdateParams.__struct_fields__) == declared | {"enabled"}
    assert set(edits.EDITABLE) == declared - {"id"}


def test_update_refuses_each_value_that_add_refuses():
    checked = 0
    for server, field, _ in BAD:
        if field == "id" or field not in server:
            continue  # update's id is a server key; a missing field is a rule of the whole server
        value = {wire_name(field): server[field]}
        if _decodes(AddParams, {"id": "s", "command": NOWHERE, **value}):
            continue  # a rule of the whole server or of the sandbox block: checked after decoding, as add's
        assert not _decodes(UpdateParams, {"id": "s~s", **value}), value
        checked += 1
    assert checked >= 20


def _decodes(type_: type, params: dict[str, Any]) -> bool:
    try:
        msgspec.json.decode(msgspec.json.encode(params), type=type_)
    except msgspec.ValidationError:
        return False
    return True

"""Soft delete, restore and the reaper through the real `python -m sidecar`, with a toolset whose
MCP server really runs; and an MCP tool its server stops listing, kept unavailable (seed 002)."""

from __future__ import annotations

import shutil
import sqlite3
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import pytest

from sidecar.client import SidecarClient
from tests.procs import wait_gone
from tests.timing import scaled

pytestmark = pytest.mark.anyio

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
EXAMPLE = FIXTURES / "toolsets" / "app-builder"
BASIC = FIXTURES / "mcp" / "basic.py"


def _with_server(tmp_path: Path) -> Path:
    folder = tmp_path / "ts"
    shutil.copytree(EXAMPLE, folder)
    with open(folder / "toolset.yaml", "a") as f:
        f.write(f"\nmcp_servers:\n  - id: basic\n    command: {sys.executable}\n    args: [\"{BASIC}\"]\n")
    return folder


async def _tool_ids(sc: SidecarClient, **params: object) -> set[str]:
    return {t["id"] for t in (await sc.request("tools/list", params))["tools"]}


async def _until(check: Callable[[], Awaitable[bool]], timeout: float = 30) -> None:
    with anyio.move_on_after(scaled(timeout)):
        while not await check():
            await anyio.sleep(0.05)
        return
    pytest.fail("the condition never held")


async def _logged(sc: SidecarClient, text: str) -> bool:
    return text in sc.stderr_text()


async def _connected(sc: SidecarClient, key: str) -> bool:
    return any(s["id"] == key and s["status"] == "connected" for s in (await sc.request("mcpServers/list"))["servers"])


async def test_soft_delete_hides_everything_and_restore_brings_it_back(sidecar: SidecarClient, tmp_path: Path):
    await sidecar.request("toolsets/import", {"path": str(_with_server(tmp_path))})
    await _until(lambda: _connected(sidecar, "app-builder~basic"))
    await sidecar.request("tools/setOverride", {"toolsetId": "app-builder", "toolId": "mcp:app-builder~basic:echo",
                                                "nameOverride": "Say"})
    pid = (await sidecar.request("tools/call", {"toolId": "mcp:app-builder~basic:pid"}))["toolCall"]["result"][
        "structuredContent"]["result"]
    before = await _tool_ids(sidecar)
    assert {"app-builder:write_file", "mcp:app-builder~basic:echo"} <= before

    await sidecar.request("toolsets/delete", {"id": "app-builder"})
    assert (await sidecar.request("toolsets/list"))["toolsets"] == []
    assert not any("app-builder" in t for t in await _tool_ids(sidecar, includeDisabled=True))
    assert all(s["toolsetId"] != "app-builder" for s in (await sidecar.request("mcpServers/list"))["servers"])
    assert await wait_gone(pid, 10), "the deleted toolset's MCP server still runs"
    refused = await sidecar.request_raw("mcpServers/reconnect", {"id": "app-builder~basic"})
    assert refused["error"]["code"] == -32011 and "toolsets/restore" in refused["error"]["message"]

    await sidecar.request("toolsets/restore", {"id": "app-builder"})
    await _until(lambda: _connected(sidecar, "app-builder~basic"))
    assert await _tool_ids(sidecar) == before
    echo = (await sidecar.request("tools/get", {"id": "mcp:app-builder~basic:echo"}))["tool"]
    assert echo["name"] == "Say"


async def test_the_reaper_removes_a_toolset_deleted_longer_than_the_retention(data_dir: Path):
    async with SidecarClient.spawn(data_dir, args=("--soft-delete-retention", "1s")) as sc:
        await sc.request("toolsets/import", {"path": str(EXAMPLE)})
        await sc.request("toolsets/delete", {"id": "app-builder"})

        async def reaped() -> bool:
            return (await sc.request("toolsets/list", {"includeDeleted": True}))["toolsets"] == []

        await _until(reaped)
        # Its rows go first, then its folder (on a thread); the log line comes after both.
        await _until(lambda: _logged(sc, "removed toolset app-builder"))  # (the log is written off the loop)
        assert not (data_dir / "toolsets" / "app-builder").exists()


async def test_the_reaper_runs_at_start(data_dir: Path):
    async with SidecarClient.spawn(data_dir) as sc:
        await sc.request("toolsets/import", {"path": str(EXAMPLE)})
        await sc.request("toolsets/delete", {"id": "app-builder"})
    async with SidecarClient.spawn(data_dir) as sc:  # two days are not over: still restorable
        assert len((await sc.request("toolsets/list", {"includeDeleted": True}))["toolsets"]) == 1
    with sqlite3.connect(data_dir / "sidecar.db") as db:
        db.execute("UPDATE toolsets SET soft_deleted_at = '2020-01-01T00:00:00.000000Z'")
    async with SidecarClient.spawn(data_dir) as sc:
        async def reaped() -> bool:
            return (await sc.request("toolsets/list", {"includeDeleted": True}))["toolsets"] == []

        await _until(reaped, timeout=10)
        await _until(lambda: _logged(sc, "removed toolset app-builder"))


async def test_an_mcp_tool_its_server_stops_listing_is_kept_when_the_user_has_something_of_it(
        sidecar: SidecarClient):
    await sidecar.request("mcpServers/add", {"id": "basic", "command": sys.executable, "args": [str(BASIC)]})
    await _until(lambda: _connected(sidecar, "basic~basic"))
    await sidecar.request("tools/setOverride", {"toolsetId": "basic", "toolId": "mcp:basic~basic:echo",
                                                "descriptionOverride": "mine"})
    await sidecar.request("tools/call", {"toolId": "mcp:basic~basic:add", "args": {"a": 1, "b": 2}})

    async def recorded() -> bool:  # records are written off the reply path
        return bool((await sidecar.request("toolCalls/list", {"toolId": "mcp:basic~basic:add"}))["toolCalls"])

    await _until(recorded)
    for name in ("echo", "add", "env"):  # env: neither an override nor a call
        await sidecar.request("tools/call", {"toolId": "mcp:basic~basic:shrink", "args": {"name": name}})

    async def shown() -> bool:
        tools = {t["id"]: t for t in (await sidecar.request("tools/list", {"includeDisabled": True}))["tools"]}
        echo = tools.get("mcp:basic~basic:echo", {})
        return echo.get("status") == "unavailable" and "mcp:basic~basic:env" not in tools

    await _until(shown)
    tools = {t["id"]: t for t in (await sidecar.request("tools/list", {"includeDisabled": True}))["tools"]}
    echo, add = tools["mcp:basic~basic:echo"], tools["mcp:basic~basic:add"]
    assert "no longer lists it" in echo["unavailableReason"] and echo["description"] == "mine"
    assert add["status"] == "unavailable" and add["inputSchema"]["properties"].keys() == {"a", "b"}
    assert "mcp:basic~basic:echo" not in await _tool_ids(sidecar)  # nor offered to a model
    refused = await sidecar.request_raw("tools/call", {"toolId": "mcp:basic~basic:echo", "args": {"text": "x"}})
    assert refused["error"]["code"] == -32011 and "no longer lists it" in refused["error"]["message"]

    await sidecar.request("mcpServers/reconnect", {"id": "basic~basic"})  # a new process lists all again

    async def back() -> bool:
        tool = (await sidecar.request("tools/list"))["tools"]
        return any(t["id"] == "mcp:basic~basic:echo" and t["status"] == "connected" for t in tool)

    await _until(back)
    echo = (await sidecar.request("tools/get", {"id": "mcp:basic~basic:echo"}))["tool"]
    assert "unavailableReason" not in echo and echo["description"] == "mine"

"""tools/search through the real sidecar: MCP tools are found as soon as their server lists them,
including tools it adds later, and are gone once the server is off or removed."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest

from sidecar.client import SidecarClient
from tests.e2e.test_mcp import status
from tests.timing import scaled
from tests.tools.search_helpers import hits

pytestmark = pytest.mark.anyio

BASIC = Path(__file__).resolve().parents[1] / "fixtures" / "mcp" / "basic.py"


async def test_mcp_tools_are_searchable_while_listed(sidecar: SidecarClient):
    assert await hits(sidecar, "echo") == []
    await sidecar.request("mcpServers/add", {"id": "basic", "command": sys.executable, "args": [str(BASIC)]})
    assert (await status(sidecar, "basic~basic", "connected", "error"))["status"] == "connected"
    assert await hits(sidecar, "echo") == [("mcp:basic~basic:echo", "prefix")]
    assert ("mcp:basic~basic:echo", "word") in await hits(sidecar, "text back")  # "Echo the text back."
    # A tool the server adds later (tools/list_changed) is found once it is listed again.
    extra = ("mcp:basic~basic:extra", "prefix")
    assert await hits(sidecar, "extra") == [("mcp:basic~basic:grow", "word")]  # "Add a tool named `extra`..."
    await sidecar.request("tools/call", {"toolId": "mcp:basic~basic:grow", "args": {}}, timeout=60)
    with anyio.fail_after(scaled(30)):  # the host lists the tools again in the background after the call answered
        # noqa reason: the change happens in another process, so it is polled over the wire
        while extra not in await hits(sidecar, "extra"):  # noqa: ASYNC110 - polled over the wire (see above)
            await anyio.sleep(0.05)
    assert (await hits(sidecar, "extra"))[0] == extra
    await sidecar.request("mcpServers/setEnabled", {"id": "basic~basic", "enabled": False})
    await status(sidecar, "basic~basic", "disabled")
    assert await hits(sidecar, "echo") == []
    assert await hits(sidecar, "echo", includeDisabled=True) == []  # not listed by a live server: not a tool now
    await sidecar.request("mcpServers/setEnabled", {"id": "basic~basic", "enabled": True})
    await status(sidecar, "basic~basic", "connected")
    assert await hits(sidecar, "echo") == [("mcp:basic~basic:echo", "prefix")]
    await sidecar.request("mcpServers/remove", {"id": "basic~basic"})
    assert await hits(sidecar, "echo") == []


async def test_an_override_of_a_listed_mcp_tool_is_searchable_at_once(sidecar: SidecarClient):
    """The server does not list again: the index must see the override itself (an MCP tool is no
    stored row, so only the per-toolset mark of the write reaches it)."""
    await sidecar.request("mcpServers/add", {"id": "basic", "command": sys.executable, "args": [str(BASIC)]})
    assert (await status(sidecar, "basic~basic", "connected", "error"))["status"] == "connected"
    assert await hits(sidecar, "echo") == [("mcp:basic~basic:echo", "prefix")]
    await sidecar.request("tools/setOverride", {"toolsetId": "basic", "toolId": "mcp:basic~basic:echo",
                                                "nameOverride": "Parrot"})
    assert await hits(sidecar, "parrot") == [("mcp:basic~basic:echo", "prefix")]
    await sidecar.request("tools/setOverride", {"toolsetId": "basic", "toolId": "basic:ech*", "enabled": False})
    assert await hits(sidecar, "parrot") == []
    assert await hits(sidecar, "parrot", includeDisabled=True) == [("mcp:basic~basic:echo", "prefix")]

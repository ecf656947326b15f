"""MCP tools in the catalog (tools/providers/mcp.py) without a real server."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from sidecar.errors import NotFound
from sidecar.mcp_host import McpHost
from sidecar.store.mcp_servers import McpServerRow
from sidecar.tools.providers import mcp as mcp_tools

pytestmark = pytest.mark.anyio


class _NoCacheDb:
    async def cached(self, name: str, key: Any, load: Callable[[], Awaitable[Any]]) -> Any:
        return await load()


@pytest.mark.parametrize(("enabled", "status"), [(True, "connecting"), (False, "disabled")])
async def test_a_tool_of_a_server_the_host_does_not_know_yet_is_not_found(
        monkeypatch: pytest.MonkeyPatch, enabled: bool, status: str) -> None:
    row = McpServerRow(id="fresh", toolset_id="ts", type="stdio", command="x", enabled=enabled)

    async def stored(db: Any, ref: str, name: str) -> tuple[McpServerRow, None]:
        return row, None

    monkeypatch.setattr(mcp_tools, "_server_and_override", stored)
    with pytest.raises(NotFound) as err:  # the host has not been handed the server yet: no KeyError
        await mcp_tools.resolve(_NoCacheDb(), McpHost(), "mcp:ts~fresh:echo")  # type: ignore[arg-type]
    assert f"ts~fresh ({status})" in err.value.message

"""Kept only for `toolsets/mcp_tools.py` and `chat/toolbox.py` until they move (to `tools/`): the
stored servers are `store/mcp_servers.py`, the service over them `mcp_host/servers.py`.
Point their imports there and delete this module."""

from __future__ import annotations

from typing import Any

from ..api.errors import Conflict, NotFound
from ..mcp_host import servers
from ..store import Database
from ..store.mcp_servers import OVERRIDE_COLUMNS, AmbiguousServer, McpServerRepo, McpServerRow

ServerRow = McpServerRow

__all__ = ["OVERRIDE_COLUMNS", "ServerRow", "all_servers", "find", "find_with_override"]


async def all_servers(db: Database) -> list[McpServerRow]:
    return await McpServerRepo(db).all()


async def find(db: Database, ref: str) -> McpServerRow:
    return await servers.find(McpServerRepo(db), ref)


async def find_with_override(db: Database, ref: str, tool: str) -> tuple[McpServerRow, Any | None]:
    try:
        found = await McpServerRepo(db).find_with_override(ref, tool)
    except AmbiguousServer as exc:
        raise Conflict("ambiguous server id", str(exc)) from None
    if found is None:
        raise NotFound("mcpServer", ref)
    return found

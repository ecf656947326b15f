"""MCP tools as the registry shows them: discovered from live connections (never stored, seed 001)
with the toolset's overrides (keyed ``server:tool``, seed 000 §1.4) applied on read."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ...api.errors import NotFound
from ...api.toolsets import Tool
from ...store import CATALOG, Database
from ...toolsets import mcp_servers
from ...toolsets.mcp_servers import ServerRow

if TYPE_CHECKING:
    from ...mcp_host.host import McpHost, McpTool
    from ..catalog import Resolved

_OVERRIDES = f"SELECT {', '.join(mcp_servers.OVERRIDE_COLUMNS)} FROM tool_overrides WHERE toolset_id = ?"


def tool_id(row: ServerRow, name: str) -> str:
    return f"mcp:{row.key}:{name}"


def parse_id(tool_id: str) -> tuple[str, str]:
    """``mcp:toolset~server:tool`` (or legacy ``mcp:server:tool``) -> (server ref, tool name)."""
    ref, sep, name = tool_id.removeprefix("mcp:").partition(":")
    if not tool_id.startswith("mcp:") or not sep or not ref or not name:
        raise NotFound("tool", tool_id, f"{tool_id!r} is not an MCP tool id (mcp:toolset~server:tool)")
    return ref, name


def _view(row: ServerRow, t: McpTool, o: Any | None) -> Tool:
    return Tool(
        id=tool_id(row, t.name), name=(o and o[3]) or t.title or t.name,
        description=(o and o[4]) or t.description, provider="mcp", input_schema=t.input_schema,
        toolset_id=row.toolset_id, renderer=o[1] if o else None,
        renderer_config=json.loads(o[2]) if o and o[2] else None,
        requires_confirmation=bool(o[5]) if o and o[5] is not None else row.requires_confirmation,
        enabled=row.should_run and (o is None or o[6] is None or bool(o[6])),
    )


async def _overrides(db: Database, row: ServerRow, cache: dict[str, dict[str, Any]]) -> dict[str, Any]:
    if row.toolset_id not in cache:
        cache[row.toolset_id] = {r[0]: r for r in await db.fetchall(_OVERRIDES, (row.toolset_id,))}
    return cache[row.toolset_id]


async def discovered(db: Database, host: McpHost) -> list[Tool]:
    tools: list[Tool] = []
    cache: dict[str, dict[str, Any]] = {}
    for row in await mcp_servers.all_servers(db):
        listed = host.tools(row.key)
        if listed:
            overrides = await _overrides(db, row, cache)
            tools += [_view(row, t, overrides.get(f"{row.server_id}:{t.name}")) for t in listed]
    return tools


async def resolve(db: Database, host: McpHost | None, ref_id: str) -> Resolved:
    from ..catalog import Resolved

    ref, name = parse_id(ref_id)
    row, override = await db.cached(CATALOG, ("mcp", ref, name),
                                    lambda: mcp_servers.find_with_override(db, ref, name))
    found = next((t for t in host.tools(row.key) if t.name == name), None) if host else None
    if found is None and host is not None and row.should_run:
        await host.settle(row.key)  # restarting after a crash: its tools are back in a moment
        found = next((t for t in host.tools(row.key) if t.name == name), None)
    if found is None:
        state = host.state(row.key).status if host else "disconnected"
        raise NotFound("tool", ref_id, f"the MCP server {row.key} ({state}) has no tool {name!r} right now")
    tool = _view(row, found, override)
    return Resolved(tool, None, {"server_key": row.key, "tool_name": name}, None)


def override_key(toolset_id: str, ref_id: str) -> str:
    """The ``server:tool`` key an MCP tool's override is stored under in its toolset."""
    ref, name = parse_id(ref_id)
    server = ref.partition("~")[2] if "~" in ref else ref
    if "~" in ref and ref.partition("~")[0] != toolset_id:
        raise NotFound("tool", ref_id, f"{ref_id!r} does not belong to toolset {toolset_id!r}")
    return f"{server}:{name}"

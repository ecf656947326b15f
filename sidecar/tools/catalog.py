"""Tools as the UI and models see them: stored definitions with the override layer applied on
read (seed 001). A disabled toolset hides all its tools."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..api.base import wire_name
from ..api.errors import NotFound, PermissionDenied
from ..api.toolsets import Tool
from ..store import CATALOG, Database
from ..store.rows import now

if TYPE_CHECKING:
    from ..mcp_host.host import McpHost

_TOOL_SQL = """
SELECT t.tool_id, t.toolset_id, t.provider, t.name, t.description, t.input_schema,
       t.requires_confirmation, t.enabled, o.renderer, o.renderer_config, o.name_override,
       o.description_override, o.requires_confirmation, o.enabled, ts.enabled, t.config, t.entrypoint,
       ts.files_dir
FROM tools t
LEFT JOIN tool_overrides o ON o.toolset_id = t.toolset_id AND o.tool_id = t.tool_id
LEFT JOIN toolsets ts ON ts.id = t.toolset_id
"""


# The pseudo toolset id that names the built-in tools in tools/setOverride.
BUILTIN = "builtin"


@dataclass(frozen=True)
class Resolved:
    """What it takes to run a tool: its public view plus where its code lives."""

    tool: Tool
    entrypoint: str | None
    config: dict[str, Any]  # timeout, needs_workspace, default renderer of built-ins
    toolset_dir: str | None


def _tool(r: Any) -> Tool:
    enabled = bool(r[7]) and (r[13] is None or bool(r[13])) and (r[14] is None or bool(r[14]))
    config = json.loads(r[15] or "{}")
    return Tool(
        id=r[0], toolset_id=r[1], provider=r[2], name=r[10] or r[3], description=r[11] or r[4],
        input_schema=json.loads(r[5]) if r[5] else None,
        requires_confirmation=bool(r[12]) if r[12] is not None else bool(r[6]),
        enabled=enabled, renderer=r[8] or config.get("renderer"),
        renderer_config=json.loads(r[9]) if r[9] else config.get("renderer_config"),
    )


async def toolset_tools(db: Database, toolset_id: str) -> list[Tool]:
    rows = await db.fetchall(_TOOL_SQL + " WHERE t.toolset_id = ? ORDER BY t.rowid", (toolset_id,))
    return [_tool(r) for r in rows]


async def list_tools(db: Database, include_disabled: bool, host: McpHost | None = None) -> list[Tool]:
    tools = [_tool(r) for r in await db.fetchall(_TOOL_SQL + " ORDER BY t.toolset_id, t.rowid")]
    if host is not None:
        from .providers.mcp import discovered

        tools += await discovered(db, host)
    return tools if include_disabled else [t for t in tools if t.enabled]


async def get_tool(db: Database, tool_id: str, host: McpHost | None = None) -> Tool:
    return (await resolve(db, tool_id, host)).tool


async def resolve(db: Database, tool_id: str, host: McpHost | None = None) -> Resolved:
    if tool_id.startswith("mcp:"):
        from .providers import mcp as mcp_tools

        return await mcp_tools.resolve(db, host, tool_id)
    # On every call's path; the catalog changes seldom, so it is read once per change.
    return await db.cached(CATALOG, tool_id, lambda: _load(db, tool_id))


async def _load(db: Database, tool_id: str) -> Resolved:
    row = await db.fetchone(_TOOL_SQL + " WHERE t.tool_id = ?", (tool_id,))
    if row is None:
        raise NotFound("tool", tool_id)
    return Resolved(_tool(row), row[16], json.loads(row[15] or "{}"), row[17])


async def sync_builtins(db: Database) -> None:
    """Make the stored built-in rows match this build (the user's ``enabled`` choice is kept)."""
    from ..builtins import BUILTINS

    wanted = {
        b.name: (b.title, b.description, json.dumps(b.input_schema), int(b.requires_confirmation),
                 json.dumps({"renderer": b.renderer, "renderer_config": b.renderer_config,
                             "needs_workspace": True}))
        for b in BUILTINS.values()
    }
    rows = await db.fetchall(
        "SELECT tool_id, name, description, input_schema, requires_confirmation, config FROM tools "
        "WHERE provider = 'builtin'")
    stored = {r[0]: tuple(r[1:]) for r in rows}
    if stored == wanted:
        return
    async with db.write(CATALOG) as w:
        await w.executemany("DELETE FROM tools WHERE tool_id = ?", [(k,) for k in stored if k not in wanted])
        await w.executemany(
            "INSERT INTO tools (tool_id, provider, name, description, input_schema, requires_confirmation, "
            "config) VALUES (?, 'builtin', ?, ?, ?, ?, ?) ON CONFLICT (tool_id) DO UPDATE SET "
            "name = excluded.name, description = excluded.description, input_schema = excluded.input_schema, "
            "requires_confirmation = excluded.requires_confirmation, config = excluded.config",
            [(k, *v) for k, v in wanted.items()])


_OVERRIDE_FIELDS = ("renderer", "renderer_config", "name_override", "description_override",
                    "requires_confirmation", "enabled")


async def set_override(
    db: Database, toolset_id: str, tool_id: str, changes: dict[str, Any], host: McpHost | None = None
) -> Tool:
    """Upsert the user's override of one tool; ``changes`` holds only the fields to change."""
    if toolset_id == BUILTIN:
        return await _set_builtin_enabled(db, tool_id, changes)
    if await db.fetchone("SELECT 1 FROM toolsets WHERE id = ?", (toolset_id,)) is None:
        raise NotFound("toolset", toolset_id)
    if tool_id.startswith("mcp:"):
        from .providers import mcp as mcp_tools

        canonical = (await resolve(db, tool_id, host)).tool.id  # the tool must be known to be overridden
        stored = mcp_tools.override_key(toolset_id, canonical)
    else:
        canonical = stored = tool_id if tool_id.startswith(f"{toolset_id}:") else f"{toolset_id}:{tool_id}"
        if await db.fetchone("SELECT 1 FROM tools WHERE tool_id = ? AND toolset_id = ?", (canonical, toolset_id)) is None:
            raise NotFound("tool", canonical, f"toolset {toolset_id!r} has no tool {tool_id!r}")
    values = {k: v for k, v in changes.items() if k in _OVERRIDE_FIELDS}
    if "renderer_config" in values and values["renderer_config"] is not None:
        values["renderer_config"] = json.dumps(values["renderer_config"])
    for flag in ("requires_confirmation", "enabled"):
        if values.get(flag) is not None:
            values[flag] = int(values[flag])
    async with db.write(CATALOG) as w:
        cursor = await w.execute(
            "SELECT id FROM tool_overrides WHERE toolset_id = ? AND tool_id = ?", (toolset_id, stored))
        existing = await cursor.fetchone()
        if existing is None:
            await w.execute(
                "INSERT INTO tool_overrides (id, toolset_id, tool_id, updated_at, origin) VALUES (?, ?, ?, ?, 'user')",
                (uuid.uuid4().hex, toolset_id, stored, now()))
        sets = ", ".join(f"{k} = ?" for k in values)
        await w.execute(
            f"UPDATE tool_overrides SET {sets}{', ' if sets else ''}origin = 'user', updated_at = ? "
            "WHERE toolset_id = ? AND tool_id = ?", (*values.values(), now(), toolset_id, stored))
    return await get_tool(db, canonical, host)


async def _set_builtin_enabled(db: Database, tool_id: str, changes: dict[str, Any]) -> Tool:
    if await db.fetchone("SELECT 1 FROM tools WHERE tool_id = ? AND provider = 'builtin'", (tool_id,)) is None:
        raise NotFound("tool", tool_id, f"there is no built-in tool {tool_id!r}")
    other = sorted(wire_name(k) for k in changes if k != "enabled")
    if other:
        raise PermissionDenied(
            f"built-in tools are read-only except enabled; {', '.join(other)} cannot be changed for {tool_id!r}")
    if changes.get("enabled") is not None:
        async with db.write(CATALOG) as w:
            await w.execute("UPDATE tools SET enabled = ? WHERE tool_id = ?", (int(changes["enabled"]), tool_id))
    return await get_tool(db, tool_id)


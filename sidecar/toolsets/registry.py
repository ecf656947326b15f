"""Tools as the UI and models see them: stored definitions with the override layer applied on
read (seed 001). A disabled toolset hides all its tools."""

from __future__ import annotations

import json
import uuid
from typing import Any

from ..api.errors import NotFound
from ..api.toolsets import Tool
from ..store import Database
from ..store.rows import now

_TOOL_SQL = """
SELECT t.tool_id, t.toolset_id, t.provider, t.name, t.description, t.input_schema,
       t.requires_confirmation, t.enabled, o.renderer, o.renderer_config, o.name_override,
       o.description_override, o.requires_confirmation, o.enabled, ts.enabled
FROM tools t
LEFT JOIN tool_overrides o ON o.toolset_id = t.toolset_id AND o.tool_id = t.tool_id
LEFT JOIN toolsets ts ON ts.id = t.toolset_id
"""


def _tool(r: Any) -> Tool:
    enabled = bool(r[7]) and (r[13] is None or bool(r[13])) and (r[14] is None or bool(r[14]))
    return Tool(
        id=r[0], toolset_id=r[1], provider=r[2], name=r[10] or r[3], description=r[11] or r[4],
        input_schema=json.loads(r[5]) if r[5] else None,
        requires_confirmation=bool(r[12]) if r[12] is not None else bool(r[6]),
        enabled=enabled, renderer=r[8], renderer_config=json.loads(r[9]) if r[9] else None,
    )


async def toolset_tools(db: Database, toolset_id: str) -> list[Tool]:
    rows = await db.fetchall(_TOOL_SQL + " WHERE t.toolset_id = ? ORDER BY t.rowid", (toolset_id,))
    return [_tool(r) for r in rows]


async def list_tools(db: Database, include_disabled: bool) -> list[Tool]:
    tools = [_tool(r) for r in await db.fetchall(_TOOL_SQL + " ORDER BY t.toolset_id, t.rowid")]
    return tools if include_disabled else [t for t in tools if t.enabled]


async def get_tool(db: Database, tool_id: str) -> Tool:
    row = await db.fetchone(_TOOL_SQL + " WHERE t.tool_id = ?", (tool_id,))
    if row is None:
        raise NotFound("tool", tool_id)
    return _tool(row)


_OVERRIDE_FIELDS = ("renderer", "renderer_config", "name_override", "description_override",
                    "requires_confirmation", "enabled")


async def set_override(db: Database, toolset_id: str, tool_id: str, changes: dict[str, Any]) -> Tool:
    """Upsert the user's override of one tool; ``changes`` holds only the fields to change."""
    canonical = tool_id if tool_id.startswith(f"{toolset_id}:") else f"{toolset_id}:{tool_id}"
    if await db.fetchone("SELECT 1 FROM toolsets WHERE id = ?", (toolset_id,)) is None:
        raise NotFound("toolset", toolset_id)
    if await db.fetchone("SELECT 1 FROM tools WHERE tool_id = ? AND toolset_id = ?", (canonical, toolset_id)) is None:
        raise NotFound("tool", canonical, f"toolset {toolset_id!r} has no tool {tool_id!r}")
    values = {k: v for k, v in changes.items() if k in _OVERRIDE_FIELDS}
    if "renderer_config" in values and values["renderer_config"] is not None:
        values["renderer_config"] = json.dumps(values["renderer_config"])
    for flag in ("requires_confirmation", "enabled"):
        if values.get(flag) is not None:
            values[flag] = int(values[flag])
    async with db.write() as w:
        cursor = await w.execute(
            "SELECT id FROM tool_overrides WHERE toolset_id = ? AND tool_id = ?", (toolset_id, canonical))
        existing = await cursor.fetchone()
        if existing is None:
            await w.execute(
                "INSERT INTO tool_overrides (id, toolset_id, tool_id, updated_at, origin) VALUES (?, ?, ?, ?, 'user')",
                (uuid.uuid4().hex, toolset_id, canonical, now()))
        sets = ", ".join(f"{k} = ?" for k in values)
        await w.execute(
            f"UPDATE tool_overrides SET {sets}{', ' if sets else ''}origin = 'user', updated_at = ? "
            "WHERE toolset_id = ? AND tool_id = ?", (*values.values(), now(), toolset_id, canonical))
    return await get_tool(db, canonical)

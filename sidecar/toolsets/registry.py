"""Tools as the UI and models see them: stored definitions with the override layer applied on
read (seed 001). A disabled toolset hides all its tools."""

from __future__ import annotations

import json
from typing import Any

from ..api.toolsets import Tool
from ..store import Database

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

"""The user's sandbox settings (seed 004): one layer per toolset (``tool_id`` '') and per tool,
each a ``sandbox.policy.Patch`` as data. The manifest's layers are stored with the toolset and
its tools (store/toolsets.py)."""

from __future__ import annotations

from typing import Any

import msgspec

from .db import CATALOG, Database
from .rows import json_text, now

WHOLE_TOOLSET = ""


class ToolLimitsRepo:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def get(self, toolset_id: str, tool_id: str = WHOLE_TOOLSET) -> dict[str, Any] | None:
        row = await self.db.fetchone("SELECT limits FROM tool_limits WHERE toolset_id = ? AND tool_id = ?",
                                     (toolset_id, tool_id))
        return msgspec.json.decode(row["limits"]) if row is not None else None

    async def set(self, toolset_id: str, tool_id: str, limits: dict[str, Any] | None) -> None:
        """Replace the layer (None or empty: remove it). Part of the catalog: tools show their limits."""
        async with self.db.write(CATALOG) as w:
            if not limits:
                await w.execute("DELETE FROM tool_limits WHERE toolset_id = ? AND tool_id = ?", (toolset_id, tool_id))
                return
            await w.execute(
                "INSERT INTO tool_limits (toolset_id, tool_id, limits, updated_at) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (toolset_id, tool_id) DO UPDATE SET limits = excluded.limits, "
                "updated_at = excluded.updated_at", (toolset_id, tool_id, json_text(limits), now()))

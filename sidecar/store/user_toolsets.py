"""The writes of toolsets made in the UI (source_type 'user', issue 14): a tool put under a new
``<slug, version>``, one removed, the current version of a slug switched, the name changed. Each is
one transaction that also moves the toolset's ``modified_at``; the uniqueness of the pair is
decided inside it (one writer), so two puts of one pair never both land."""

from __future__ import annotations

import aiosqlite
import msgspec

from .db import CATALOG, Database
from .toolsets import StoredTool, insert_tools


class UserToolsetRepo:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def update(self, toolset_id: str, name: str | None, description: str | None, stamp: str) -> None:
        async with self.db.write(CATALOG) as w:
            await w.execute(
                "UPDATE toolsets SET name = coalesce(?, name), description = coalesce(?, description), "
                "modified_at = ?, updated_at = ? WHERE id = ?", (name, description, stamp, stamp, toolset_id))

    async def put_tool(self, toolset_id: str, tool: StoredTool, stamp: str) -> bool:
        """Store ``tool`` as the current version of its slug; False (nothing written) when the
        toolset has its ``<slug, version>`` already."""
        async with self.db.write(CATALOG) as w:
            cursor = await w.execute("SELECT 1 FROM tools WHERE toolset_id = ? AND slug = ? AND version = ?",
                                     (toolset_id, tool.slug, tool.version))
            if await cursor.fetchone() is not None:
                return False
            await w.execute("UPDATE tools SET current = 0 WHERE toolset_id = ? AND slug = ?", (toolset_id, tool.slug))
            await insert_tools(w, toolset_id, [msgspec.structs.replace(tool, current=True, created_at=stamp,
                                                                       modified_at=stamp)])
            await _touch(w, toolset_id, stamp)
        return True

    async def delete_tool(self, toolset_id: str, slug: str, version: str, stamp: str) -> str | None:
        """Remove the pair's tool and its overrides; the most recently put remaining version of the
        slug becomes current if it was. The removed tool's id, or None when there was none."""
        async with self.db.write(CATALOG) as w:
            cursor = await w.execute("SELECT tool_id, current FROM tools WHERE toolset_id = ? AND slug = ? "
                                     "AND version = ?", (toolset_id, slug, version))
            found = await cursor.fetchone()
            if found is None:
                return None
            await w.execute("DELETE FROM tools WHERE tool_id = ?", (found["tool_id"],))
            await w.execute("DELETE FROM tool_overrides WHERE toolset_id = ? AND tool_id = ?",
                            (toolset_id, found["tool_id"]))
            if found["current"]:
                await w.execute(
                    "UPDATE tools SET current = 1 WHERE rowid = (SELECT rowid FROM tools WHERE toolset_id = ? "
                    "AND slug = ? ORDER BY created_at DESC, rowid DESC LIMIT 1)", (toolset_id, slug))
            await _touch(w, toolset_id, stamp)
        return found["tool_id"]

    async def set_current(self, toolset_id: str, slug: str, version: str, stamp: str) -> str | None:
        """Make the pair the slug's current version; its tool id, or None when the toolset has no such pair."""
        async with self.db.write(CATALOG) as w:
            cursor = await w.execute("SELECT tool_id FROM tools WHERE toolset_id = ? AND slug = ? AND version = ?",
                                     (toolset_id, slug, version))
            found = await cursor.fetchone()
            if found is None:
                return None
            await w.execute("UPDATE tools SET current = 0 WHERE toolset_id = ? AND slug = ?", (toolset_id, slug))
            await w.execute("UPDATE tools SET current = 1 WHERE tool_id = ?", (found["tool_id"],))
            await _touch(w, toolset_id, stamp)
        return found["tool_id"]


async def _touch(w: aiosqlite.Connection, toolset_id: str, stamp: str) -> None:
    await w.execute("UPDATE toolsets SET modified_at = ?, updated_at = ? WHERE id = ?", (stamp, stamp, toolset_id))

"""The user's settings (``settings/get|set``): one row per setting in the ``settings`` table
(migration 0001), its value as JSON, so a setting added later needs no migration.

The table also holds the default model provider (``store/providers.py``, a plain id under its own
key); the keys here never collide with it.
"""

from __future__ import annotations

from typing import Any

import msgspec

from .db import Database
from .rows import now

# Key of each user setting in the table: the wire name, so a reader of the database finds it.
TOOLS_ENABLED = "toolsEnabled"
# Which tools a chat turn offers (issue 28), each under its wire name as well.
TOOL_SELECTION_KEYS = ("toolSelection", "toolBudgetTokens", "toolBudgetCount", "relevantTools", "pinnedTools",
                       "keepBuiltins")
USER_KEYS = (TOOLS_ENABLED, *TOOL_SELECTION_KEYS)


class SettingsRepo:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def load(self) -> dict[str, Any]:
        """The user settings that were ever set, by key; a value that no longer decodes is left
        out (its default applies), never a reason not to start."""
        marks = ", ".join("?" * len(USER_KEYS))
        rows = await self.db.fetchall(f"SELECT key, value FROM settings WHERE key IN ({marks})", USER_KEYS)
        found: dict[str, Any] = {}
        for row in rows:
            try:
                found[row["key"]] = msgspec.json.decode(row["value"])
            except msgspec.DecodeError:
                continue
        return found

    async def save(self, values: dict[str, Any]) -> None:
        """Set the given settings in one transaction; the others keep their values."""
        stamp = now()
        async with self.db.write() as w:
            await w.executemany(
                "INSERT INTO settings (key, value, updated_at) VALUES (?, ?, ?) ON CONFLICT(key) DO UPDATE SET "
                "value = excluded.value, updated_at = excluded.updated_at",
                [(key, msgspec.json.encode(value).decode(), stamp) for key, value in values.items()])


async def tools_enabled(db: Database) -> bool:
    """The kill switch as stored (on unless the user turned it off): ``initialize`` reports it
    before any service exists."""
    return (await SettingsRepo(db).load()).get(TOOLS_ENABLED) is not False

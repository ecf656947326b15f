"""The configuration values a user set for toolsets and their tools (seed 004).

A secret field's row only says that a value is set: the value itself is in the secret store, and
the table's CHECK refuses one here. Every write changes the tool catalog's cache (a tool's status
and the settings a call gets are read with it)."""

from __future__ import annotations

from typing import Any

import msgspec

from .db import CATALOG, Database
from .rows import json_text, now

TOOLSET_SCOPE = "*"  # the scope of a toolset-level field


class ConfigValue(msgspec.Struct, frozen=True, kw_only=True):
    toolset_id: str
    scope: str  # a tool's id inside its toolset, or TOOLSET_SCOPE
    key: str
    secret: bool
    value: Any = None  # None for a secret (see the secret store)


def _row(r: Any) -> ConfigValue:
    secret = bool(r["secret"])
    return ConfigValue(toolset_id=r["toolset_id"], scope=r["scope"], key=r["key"], secret=secret,
                       value=None if secret else msgspec.json.decode(r["value"]))


_COLS = "toolset_id, scope, key, value, secret"


class ToolConfigRepo:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def of_toolset(self, toolset_id: str) -> list[ConfigValue]:
        rows = await self.db.fetchall(f"SELECT {_COLS} FROM tool_config WHERE toolset_id = ? ORDER BY scope, key",
                                      (toolset_id,))
        return [_row(r) for r in rows]

    async def all(self) -> list[ConfigValue]:
        return [_row(r) for r in await self.db.fetchall(f"SELECT {_COLS} FROM tool_config")]

    async def put(self, values: list[ConfigValue]) -> None:
        """Set each value (a secret one as a marker only), in one transaction."""
        stamp = now()
        async with self.db.write(CATALOG) as w:
            await w.executemany(
                "INSERT INTO tool_config (toolset_id, scope, key, value, secret, updated_at) VALUES (?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (toolset_id, scope, key) DO UPDATE SET value = excluded.value, "
                "secret = excluded.secret, updated_at = excluded.updated_at",
                [(v.toolset_id, v.scope, v.key, None if v.secret else json_text(v.value), int(v.secret), stamp)
                 for v in values])

    async def delete(self, toolset_id: str, keys: list[tuple[str, str]]) -> None:
        """Remove the values of ``keys`` ((scope, key) pairs) of one toolset."""
        if not keys:
            return
        async with self.db.write(CATALOG) as w:
            await w.executemany("DELETE FROM tool_config WHERE toolset_id = ? AND scope = ? AND key = ?",
                                [(toolset_id, scope, key) for scope, key in keys])

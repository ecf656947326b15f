"""Model providers: one row each, and which one is the default (the ``default_provider`` setting)."""

from __future__ import annotations

from typing import Any, Literal

import aiosqlite
import msgspec

from .db import Database
from .rows import named

ProviderKind = Literal["scripted", "openai", "anthropic"]
BUILTIN_ID = "scripted"  # the provider that needs no row and is always there
DEFAULT_SETTING = "default_provider"

_encode = msgspec.json.encode
_decode_config = msgspec.json.Decoder(dict[str, Any]).decode


class ProviderRow(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    kind: ProviderKind
    base_url: str | None = None
    api_key: str | None = None  # a ${VAR} reference (a literal only in rows not yet moved to the store)
    api_key_secret: str | None = None  # the secret store's entry holding a literal key (provider:<id>)
    default_model: str | None = None
    config: dict[str, Any] | None = None
    updated_at: str | None = None  # None: the built-in provider, never configured

    @property
    def built_in(self) -> bool:
        return self.id == BUILTIN_ID


_COLS = "id, kind, base_url, api_key, api_key_secret, default_model, config, updated_at"


def _row(r: aiosqlite.Row) -> ProviderRow:
    return named(ProviderRow, r, config=_decode_config(r["config"] or "{}"))


class ProviderRepo:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def all_rows(self) -> list[ProviderRow]:
        return [_row(r) for r in await self.db.fetchall(f"SELECT {_COLS} FROM providers ORDER BY id")]

    async def get(self, provider_id: str) -> ProviderRow | None:
        r = await self.db.fetchone(f"SELECT {_COLS} FROM providers WHERE id = ?", (provider_id,))
        return _row(r) if r is not None else None

    async def put(self, row: ProviderRow) -> None:
        async with self.db.write() as w:
            await w.execute(
                f"INSERT INTO providers ({_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET "
                "kind = excluded.kind, base_url = excluded.base_url, api_key = excluded.api_key, "
                "api_key_secret = excluded.api_key_secret, default_model = excluded.default_model, "
                "config = excluded.config, updated_at = excluded.updated_at",
                (row.id, row.kind, row.base_url, row.api_key, row.api_key_secret, row.default_model,
                 _encode(row.config or {}), row.updated_at))

    async def literal_keys(self) -> list[tuple[str, str]]:
        """(id, key) of every row whose api_key is a literal key, not a ${VAR} reference."""
        rows = await self.db.fetchall("SELECT id, api_key FROM providers WHERE api_key IS NOT NULL "
                                      "AND api_key != '' AND instr(api_key, '${') = 0")
        return [(r["id"], r["api_key"]) for r in rows]

    async def key_moved(self, provider_id: str, literal: str, secret_name: str) -> None:
        """The row's literal key now lives in the secret store under `secret_name`: the row keeps that
        name, and the old text is overwritten in the database file (not left in a free page or the WAL)."""
        async with self.db.write() as w:
            await w.execute("PRAGMA secure_delete = ON")
            try:
                await w.execute("UPDATE providers SET api_key = NULL, api_key_secret = ? WHERE id = ? AND api_key = ?",
                                (secret_name, provider_id, literal))
            finally:
                await w.execute("PRAGMA secure_delete = OFF")
        await self.db.checkpoint()

    async def delete(self, provider_id: str) -> bool:
        """Remove a provider (and its place as the default); False when there was none."""
        async with self.db.write() as w:
            cursor = await w.execute("DELETE FROM providers WHERE id = ?", (provider_id,))
            if cursor.rowcount == 0:
                return False
            await w.execute("DELETE FROM settings WHERE key = ? AND value = ?", (DEFAULT_SETTING, provider_id))
            return True

    async def set_default(self, provider_id: str, stamp: str) -> None:
        async with self.db.write() as w:
            await w.execute(
                "INSERT INTO settings (key, value, updated_at) VALUES (?, ?, ?) ON CONFLICT(key) DO UPDATE SET "
                "value = excluded.value, updated_at = excluded.updated_at", (DEFAULT_SETTING, provider_id, stamp))

    async def default_id(self) -> str | None:
        """The default provider's id, when one is set and still configured."""
        r = await self.db.fetchone(
            "SELECT s.value AS id FROM settings s JOIN providers p ON p.id = s.value WHERE s.key = ?",
            (DEFAULT_SETTING,))
        return r["id"] if r is not None else None

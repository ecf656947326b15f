"""Workspace manifests: immutable ``{path: sha256}`` versions of a chat's files."""

from __future__ import annotations

from typing import Any

import msgspec

from .db import Database
from .rows import new_id, now

_encode = msgspec.json.Encoder(order="sorted").encode
_decode_files = msgspec.json.Decoder(dict[str, str]).decode


class ManifestRow(msgspec.Struct):
    id: str
    chat_id: str
    parent_id: str | None
    files: dict[str, str]
    created_at: str
    source: str
    source_ref: str | None


_COLS = "id, chat_id, parent_id, files, created_at, source, source_ref"


def _row(r: Any) -> ManifestRow:
    return ManifestRow(r[0], r[1], r[2], _decode_files(r[3]), r[4], r[5], r[6])


class ManifestRepo:
    def __init__(self, db: Database) -> None:
        self.db = db

    def new(
        self, chat_id: str, parent_id: str | None, files: dict[str, str], source: str,
        source_ref: str | None,
    ) -> ManifestRow:
        return ManifestRow(new_id(), chat_id, parent_id, files, now(), source, source_ref)

    @staticmethod
    def insert_sql(m: ManifestRow) -> tuple[str, tuple[Any, ...]]:
        """For callers that write a manifest in the same transaction as other rows."""
        return (
            f"INSERT INTO workspace_manifests ({_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (m.id, m.chat_id, m.parent_id, _encode(m.files), m.created_at, m.source, m.source_ref),
        )

    async def get(self, chat_id: str, manifest_id: str) -> ManifestRow | None:
        row = await self.db.fetchone(
            f"SELECT {_COLS} FROM workspace_manifests WHERE id = ? AND chat_id = ?",
            (manifest_id, chat_id),
        )
        return _row(row) if row else None

    async def all_files(self, chat_id: str) -> list[dict[str, str]]:
        rows = await self.db.fetchall(
            "SELECT files FROM workspace_manifests WHERE chat_id = ?", (chat_id,)
        )
        return [_decode_files(r[0]) for r in rows]

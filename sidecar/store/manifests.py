"""Workspace manifests: immutable ``{path: sha256}`` versions of a chat's files."""

from __future__ import annotations

import sqlite3
from typing import Literal

import aiosqlite
import msgspec

from .db import Database, Work
from .rows import named, new_id, now

ManifestSource = Literal["user_upload", "tool_run", "branch", "edit"]

_encode = msgspec.json.Encoder(order="sorted").encode
_decode_files = msgspec.json.Decoder(dict[str, str]).decode


class ManifestRow(msgspec.Struct, kw_only=True):
    id: str
    chat_id: str
    parent_id: str | None = None
    files: dict[str, str]
    created_at: str
    source: ManifestSource
    source_ref: str | None = None


_COLS = "id, chat_id, parent_id, files, created_at, source, source_ref"


def _row(r: aiosqlite.Row) -> ManifestRow:
    return named(ManifestRow, r, files=_decode_files(r["files"]))


class ManifestRepo:
    def __init__(self, db: Database) -> None:
        self.db = db

    def new(
        self, chat_id: str, parent_id: str | None, files: dict[str, str], source: ManifestSource,
        source_ref: str | None,
    ) -> ManifestRow:
        return ManifestRow(id=new_id(), chat_id=chat_id, parent_id=parent_id, files=files, created_at=now(),
                           source=source, source_ref=source_ref)

    async def make_active(self, m: ManifestRow, leaf_message_id: str | None, also: Work | None = None) -> None:
        """Store a new version and make it the chat's active one, recorded as the state after
        ``leaf_message_id``: one transaction, so a crash never leaves a version half adopted. On
        every tool call's path in a chat: one hand-off to the database's thread, not one per statement.
        ``also``: more to write in the same transaction (the end of the tool call that made it)."""
        values = (m.id, m.chat_id, m.parent_id, _encode(m.files), m.created_at, m.source, m.source_ref)

        def adopt(conn: sqlite3.Connection) -> None:
            conn.execute(f"INSERT INTO workspace_manifests ({_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?)", values)
            conn.execute("UPDATE chats SET active_manifest_id = ?, updated_at = ? WHERE id = ?",
                         (m.id, m.created_at, m.chat_id))
            if leaf_message_id:
                conn.execute("UPDATE messages SET manifest_id = ? WHERE id = ?", (m.id, leaf_message_id))
            if also is not None:
                also(conn)

        await self.db.write_whole(adopt)

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
        return [_decode_files(r["files"]) for r in rows]

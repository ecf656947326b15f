"""Chats and their message tree."""

from __future__ import annotations

from typing import Any

import msgspec

from .db import Database
from .rows import new_id, now


class ChatRow(msgspec.Struct):
    id: str
    title: str
    created_at: str
    updated_at: str
    active_leaf_message_id: str | None
    active_manifest_id: str | None


class MessageRow(msgspec.Struct):
    id: str
    chat_id: str
    parent_id: str | None
    role: str
    content: str
    manifest_id: str | None
    status: str
    created_at: str


_CHAT_COLS = "id, title, created_at, updated_at, active_leaf_message_id, active_manifest_id"
_MSG_COLS = "id, chat_id, parent_id, role, content, manifest_id, status, created_at"


def _chat(row: Any) -> ChatRow:
    return ChatRow(*row)


def _message(row: Any) -> MessageRow:
    return MessageRow(*row)


class ChatRepo:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def create(self, title: str) -> ChatRow:
        stamp = now()
        chat = ChatRow(new_id(), title, stamp, stamp, None, None)
        async with self.db.write() as w:
            await w.execute(
                "INSERT INTO chats (id, title, created_at, updated_at) VALUES (?, ?, ?, ?)",
                (chat.id, chat.title, stamp, stamp),
            )
        return chat

    async def get(self, chat_id: str) -> ChatRow | None:
        row = await self.db.fetchone(f"SELECT {_CHAT_COLS} FROM chats WHERE id = ?", (chat_id,))
        return _chat(row) if row else None

    async def list(self) -> list[ChatRow]:
        rows = await self.db.fetchall(f"SELECT {_CHAT_COLS} FROM chats ORDER BY updated_at DESC")
        return [_chat(r) for r in rows]

    async def delete(self, chat_id: str) -> None:
        async with self.db.write() as w:
            await w.execute("DELETE FROM chats WHERE id = ?", (chat_id,))

    async def messages(self, chat_id: str) -> list[MessageRow]:
        rows = await self.db.fetchall(
            f"SELECT {_MSG_COLS} FROM messages WHERE chat_id = ? ORDER BY created_at, id", (chat_id,)
        )
        return [_message(r) for r in rows]

    async def message(self, chat_id: str, message_id: str) -> MessageRow | None:
        row = await self.db.fetchone(
            f"SELECT {_MSG_COLS} FROM messages WHERE id = ? AND chat_id = ?", (message_id, chat_id)
        )
        return _message(row) if row else None

    async def add_message(
        self, chat_id: str, parent_id: str | None, role: str, content: str,
        manifest_id: str | None, *, make_active: bool = True,
    ) -> MessageRow:
        msg = MessageRow(new_id(), chat_id, parent_id, role, content, manifest_id, "complete", now())
        async with self.db.write() as w:
            await w.execute(
                f"INSERT INTO messages ({_MSG_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (msg.id, chat_id, parent_id, role, content, manifest_id, msg.status, msg.created_at),
            )
            if make_active:
                await w.execute(
                    "UPDATE chats SET active_leaf_message_id = ?, updated_at = ? WHERE id = ?",
                    (msg.id, msg.created_at, chat_id),
                )
        return msg

    async def set_position(self, chat_id: str, leaf_id: str | None, manifest_id: str | None) -> None:
        """Move the active leaf and the active manifest."""
        async with self.db.write() as w:
            await w.execute(
                "UPDATE chats SET active_leaf_message_id = ?, active_manifest_id = ?, "
                "updated_at = ? WHERE id = ?",
                (leaf_id, manifest_id, now(), chat_id),
            )

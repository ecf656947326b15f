"""Chats and their message tree."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from typing import Any, Literal, cast, get_args

import aiosqlite
import msgspec

from .db import Database, Work
from .rows import named, new_id, now

Role = Literal["system", "user", "assistant", "tool"]
MessageStatus = Literal["streaming", "complete", "cancelled", "error"]


class ChatRow(msgspec.Struct, kw_only=True):
    id: str
    title: str
    created_at: str
    updated_at: str
    active_leaf_message_id: str | None = None
    active_manifest_id: str | None = None
    settings: str | None = None  # JSON: the chat's own tool-selection settings ({} or absent: none)


class SwitchRow(msgspec.Struct, kw_only=True):
    """A branch switch that has begun and not yet moved the chat (see migration 0014)."""

    chat_id: str
    leaf_message_id: str | None = None
    manifest_id: str | None = None
    started_at: str


class MessageRow(msgspec.Struct, kw_only=True):
    id: str
    chat_id: str
    parent_id: str | None = None
    role: Role
    content: str
    manifest_id: str | None = None
    status: MessageStatus
    created_at: str
    # JSON: a turn's steps (text and tool calls in order) or a user message's attachments.
    parts: str | None = None
    provider: str | None = None
    model: str | None = None
    stop_reason: str | None = None
    usage: str | None = None  # JSON {inputTokens, outputTokens}
    tools_offered: str | None = None  # JSON: what each model call of the turn was offered (0018)


_CHAT_COLS = "id, title, created_at, updated_at, active_leaf_message_id, active_manifest_id, settings"
_MSG_COLS = ("id, chat_id, parent_id, role, content, manifest_id, status, created_at, parts, provider, model, "
             "stop_reason, usage, tools_offered")
_MSG_INSERT = (f"INSERT INTO messages ({_MSG_COLS}) VALUES (:id, :chat_id, :parent_id, :role, :content, :manifest_id, "
               ":status, :created_at, :parts, :provider, :model, :stop_reason, :usage, :tools_offered)")


_POSITION = "UPDATE chats SET active_leaf_message_id = ?, active_manifest_id = ?, updated_at = ? WHERE id = ?"

_ROLES = frozenset(get_args(Role))
_STATUSES = frozenset(get_args(MessageStatus))


def _message(r: aiosqlite.Row) -> MessageRow:
    """A message row, built directly (``named`` costs ~6x more, and a chat's messages are read
    twice per send); a role or status outside its Literal still fails as ``named`` makes it."""
    if r["role"] not in _ROLES or r["status"] not in _STATUSES:
        return named(MessageRow, r)  # raises the validation error
    return MessageRow(id=r["id"], chat_id=r["chat_id"], parent_id=r["parent_id"], role=r["role"],
                      content=r["content"], manifest_id=r["manifest_id"], status=r["status"],
                      created_at=r["created_at"], parts=r["parts"], provider=r["provider"], model=r["model"],
                      stop_reason=r["stop_reason"], usage=r["usage"], tools_offered=r["tools_offered"])


def _msg_values(m: MessageRow) -> dict[str, Any]:
    return msgspec.structs.asdict(m)


class ChatRepo:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def create(self, title: str) -> ChatRow:
        stamp = now()
        chat = ChatRow(id=new_id(), title=title, created_at=stamp, updated_at=stamp)
        async with self.db.write() as w:
            await w.execute(
                "INSERT INTO chats (id, title, created_at, updated_at) VALUES (?, ?, ?, ?)",
                (chat.id, chat.title, stamp, stamp),
            )
        return chat

    async def get(self, chat_id: str) -> ChatRow | None:
        row = await self.db.fetchone(f"SELECT {_CHAT_COLS} FROM chats WHERE id = ?", (chat_id,))
        return named(ChatRow, row) if row else None

    async def get_then(self, chat_id: str, then: Callable[[ChatRow], Work | None]) -> ChatRow | None:
        """``get``, and in the same transaction (one trip to the database's thread) what ``then``
        makes of the chat as read, if anything."""
        def work(conn: sqlite3.Connection) -> ChatRow | None:
            row = conn.execute(f"SELECT {_CHAT_COLS} FROM chats WHERE id = ?", (chat_id,)).fetchone()
            chat = named(ChatRow, row) if row else None
            if chat is not None and (more := then(chat)) is not None:
                more(conn)
            return chat

        return await self.db.write_whole(work)

    async def all_chats(self) -> list[ChatRow]:
        """Every chat, the most recently active first."""
        rows = await self.db.fetchall(f"SELECT {_CHAT_COLS} FROM chats ORDER BY updated_at DESC")
        return [named(ChatRow, r) for r in rows]

    async def page(self, limit: int, after: tuple[str, str] | None) -> list[ChatRow]:
        """Up to ``limit`` chats past ``after``, most recently active first: a keyset page on
        (updated_at, id), both descending."""
        where, params = ("WHERE (updated_at, id) < (?, ?) ", after) if after is not None else ("", ())
        rows = await self.db.fetchall(
            f"SELECT {_CHAT_COLS} FROM chats {where}ORDER BY updated_at DESC, id DESC LIMIT ?", (*params, limit))
        return [named(ChatRow, r) for r in rows]

    async def tool_settings(self, chat_id: str) -> dict[str, Any]:
        """The chat's own tool-selection settings (chats.settings, a JSON object); {} when none
        or when what is stored no longer decodes (the user's settings apply then)."""
        row = await self.db.fetchone("SELECT settings FROM chats WHERE id = ?", (chat_id,))
        try:
            found: Any = json.loads(row["settings"]) if row and row["settings"] else {}
        except ValueError:
            return {}
        return cast("dict[str, Any]", found) if isinstance(found, dict) else {}

    async def update_chat(self, chat_id: str, *, title: str | None = None,
                          tool_settings: dict[str, Any] | None = None) -> None:
        """chats/update: what is given, in one transaction (not the chat's updated_at: that is
        its activity, which orders chats/list)."""
        async with self.db.write() as w:
            if title is not None:
                await w.execute("UPDATE chats SET title = ? WHERE id = ?", (title, chat_id))
            if tool_settings is not None:
                await w.execute("UPDATE chats SET settings = ? WHERE id = ?", (json.dumps(tool_settings), chat_id))

    async def delete(self, chat_id: str) -> None:
        async with self.db.write() as w:
            await w.execute("DELETE FROM chats WHERE id = ?", (chat_id,))

    async def messages(self, chat_id: str) -> list[MessageRow]:
        rows = await self.db.fetchall(
            f"SELECT {_MSG_COLS} FROM messages WHERE chat_id = ? ORDER BY created_at, id", (chat_id,)
        )
        return [_message(r) for r in rows]

    async def insert(self, *messages: MessageRow, manifest_id: str | None) -> None:
        """Insert messages (each one's parent first) and make the last the active leaf, with
        ``manifest_id`` the active manifest, in one transaction."""
        async with self.db.write() as w:
            await w.executemany(_MSG_INSERT, [_msg_values(m) for m in messages])
            if messages:
                await self._position(w, messages[-1].chat_id, messages[-1].id, manifest_id)

    async def update(self, msg: MessageRow) -> None:
        """Write what a message has become (a turn's checkpoint or its end). Not its manifest:
        the workspace records that on the active leaf with every snapshot."""
        async with self.db.write() as w:
            await w.execute(
                "UPDATE messages SET content = ?, status = ?, parts = ?, provider = ?, model = ?, stop_reason = ?, "
                "usage = ?, tools_offered = ? WHERE id = ?",
                (msg.content, msg.status, msg.parts, msg.provider, msg.model, msg.stop_reason, msg.usage,
                 msg.tools_offered, msg.id))

    async def fail_streaming(self) -> int:
        """Turns a previous sidecar left streaming can never finish: say so."""
        if await self.db.fetchone("SELECT 1 FROM messages WHERE status = 'streaming' LIMIT 1") is None:
            return 0
        async with self.db.write() as w:
            cursor = await w.execute(
                "UPDATE messages SET status = 'error', stop_reason = 'error' WHERE status = 'streaming'")
            return cursor.rowcount

    async def set_position(self, chat_id: str, leaf_id: str | None, manifest_id: str | None, *,
                           switched: bool = False) -> None:
        """Move the active leaf and the active manifest; ``switched``: this ends the switch
        ``begin_switch`` recorded, in the same transaction."""
        if not switched:
            async with self.db.write() as w:
                await self._position(w, chat_id, leaf_id, manifest_id)
            return

        def end(conn: sqlite3.Connection) -> None:  # one hand-off: a switch's cost is the budget's
            conn.execute(_POSITION, (leaf_id, manifest_id, now(), chat_id))
            conn.execute("DELETE FROM workspace_switches WHERE chat_id = ?", (chat_id,))

        await self.db.write_whole(end)

    # -- branch switches in progress ----------------------------------------------------------

    async def begin_switch(self, chat_id: str, leaf_id: str | None, manifest_id: str | None) -> None:
        """Record where the chat is going before a file moves: committed before this returns (WAL
        commits survive the process being killed), so a restart knows the folder is mid-switch."""
        def begin(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT OR REPLACE INTO workspace_switches (chat_id, leaf_message_id, manifest_id, started_at) "
                "VALUES (?, ?, ?, ?)", (chat_id, leaf_id, manifest_id, now()))

        await self.db.write_whole(begin)

    async def pending_switch(self, chat_id: str) -> SwitchRow | None:
        row = await self.db.fetchone(
            "SELECT chat_id, leaf_message_id, manifest_id, started_at FROM workspace_switches WHERE chat_id = ?",
            (chat_id,))
        return named(SwitchRow, row) if row else None

    async def switching_chats(self) -> list[str]:
        """Chats a switch was begun on and not finished (by a crash, or a failure mid-way)."""
        return [r["chat_id"] for r in await self.db.fetchall("SELECT chat_id FROM workspace_switches")]

    async def end_switch(self, chat_id: str) -> None:
        """Forget a switch that was rolled back (the chat stays where it was)."""
        async with self.db.write() as w:
            await w.execute("DELETE FROM workspace_switches WHERE chat_id = ?", (chat_id,))

    @staticmethod
    async def _position(w: aiosqlite.Connection, chat_id: str, leaf_id: str | None, manifest_id: str | None) -> None:
        await w.execute(_POSITION, (leaf_id, manifest_id, now(), chat_id))

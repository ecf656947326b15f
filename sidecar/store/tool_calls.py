"""Tool calls: written when a call starts and again when it ends, never in between."""

from __future__ import annotations

from typing import Any

import msgspec

from .db import Database
from .rows import now

_encode = msgspec.json.encode
_decode = msgspec.json.decode


class ToolCallRow(msgspec.Struct, kw_only=True):
    id: str
    tool_id: str
    chat_id: str | None
    message_id: str | None = None
    args: dict[str, Any]
    status: str
    started_at: str
    result: Any = None
    error: str | None = None
    error_kind: str | None = None
    render_plan: dict[str, Any] | None = None
    pre_manifest_id: str | None = None
    post_manifest_id: str | None = None
    finished_at: str | None = None


_COLS = ("id, tool_id, chat_id, message_id, args, status, started_at, result, error, error_kind, "
         "render_plan, pre_manifest_id, post_manifest_id, finished_at")


def _row(r: Any) -> ToolCallRow:
    return ToolCallRow(
        id=r[0], tool_id=r[1], chat_id=r[2], message_id=r[3], args=_decode(r[4]), status=r[5],
        started_at=r[6], result=_decode(r[7]) if r[7] is not None else None, error=r[8], error_kind=r[9],
        render_plan=_decode(r[10]) if r[10] else None, pre_manifest_id=r[11], post_manifest_id=r[12],
        finished_at=r[13],
    )


_INSERT = ("INSERT INTO tool_calls (id, tool_id, chat_id, message_id, args, status, started_at, "
           "pre_manifest_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?)")


def _values(call: ToolCallRow) -> tuple[Any, ...]:
    return (call.id, call.tool_id, call.chat_id, call.message_id, _encode(call.args), call.status,
            call.started_at, call.pre_manifest_id)


class ToolCallRepo:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def start(self, call: ToolCallRow) -> None:
        async with self.db.write() as w:
            await w.execute(_INSERT, _values(call))

    async def finish(self, call: ToolCallRow, *, inserted: bool = True) -> None:
        """Record how the call ended (``inserted``: ``start`` wrote its row; else the whole row now)."""
        call.finished_at = call.finished_at or now()
        outcome = (call.status, _encode(call.result) if call.result is not None else None, call.error,
                   call.error_kind, _encode(call.render_plan) if call.render_plan else None,
                   call.post_manifest_id, call.finished_at)
        async with self.db.write() as w:
            if inserted:
                await w.execute(
                    "UPDATE tool_calls SET status = ?, result = ?, error = ?, error_kind = ?, render_plan = ?, "
                    "post_manifest_id = ?, finished_at = ? WHERE id = ?", (*outcome, call.id))
            else:
                await w.execute(
                    "INSERT INTO tool_calls (id, tool_id, chat_id, message_id, args, started_at, pre_manifest_id, "
                    "status, result, error, error_kind, render_plan, post_manifest_id, finished_at) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (call.id, call.tool_id, call.chat_id, call.message_id, _encode(call.args), call.started_at,
                     call.pre_manifest_id, *outcome))
            await w.execute("UPDATE tools SET call_count = call_count + 1, last_called_at = ? WHERE tool_id = ?",
                            (call.finished_at, call.tool_id))

    async def get(self, call_id: str) -> ToolCallRow | None:
        row = await self.db.fetchone(f"SELECT {_COLS} FROM tool_calls WHERE id = ?", (call_id,))
        return _row(row) if row else None

    async def fail_unfinished(self) -> int:
        """Calls a previous sidecar left running can never finish: say so instead of 'running'.
        Runs at every start, so the usual case (none) is one indexed read, not a write."""
        if await self.db.fetchone("SELECT 1 FROM tool_calls WHERE status IN ('pending', 'running') LIMIT 1") is None:
            return 0
        async with self.db.write() as w:
            cursor = await w.execute(
                "UPDATE tool_calls SET status = 'error', error_kind = 'interrupted', finished_at = ?, "
                "error = 'the sidecar stopped before this call finished' "
                "WHERE status IN ('pending', 'running')", (now(),))
            return cursor.rowcount

"""Schedules: a tool, its arguments and a cron expression, with where its output goes and when it
is due next (``next_run_at``, UTC, in ``rows.now()``'s form so text order is time order)."""

from __future__ import annotations

from typing import Any, Literal

import aiosqlite
import msgspec

from .db import Database
from .rows import named, now

Missed = Literal["skip", "runOnce"]
Source = Literal["user", "manifest"]


class ScheduleRow(msgspec.Struct, kw_only=True):
    id: str
    tool_id: str
    args: dict[str, Any] = {}
    cron: str
    timezone: str
    prompt: str | None = None
    chat_id: str | None = None
    provider: str | None = None
    model: str | None = None
    enabled: bool = True
    missed: Missed = "runOnce"
    allow_unattended: bool = False
    paused_reason: str | None = None
    source: Source = "user"
    toolset_id: str | None = None
    declared: dict[str, Any] | None = None  # a manifest's trigger as last installed (its cron, prompt)
    next_run_at: str | None = None
    last_run_at: str | None = None
    last_tool_call_id: str | None = None
    last_status: str | None = None
    last_error: str | None = None
    created_at: str
    updated_at: str


_COLS = ("id, tool_id, args, cron, timezone, prompt, chat_id, provider, model, enabled, missed, allow_unattended, "
         "paused_reason, source, toolset_id, declared, next_run_at, last_run_at, last_tool_call_id, last_status, "
         "last_error, created_at, updated_at")
_FIELDS = [c.strip() for c in _COLS.split(",")]
_ACTIVE = "enabled = 1 AND paused_reason IS NULL"


def _row(r: aiosqlite.Row) -> ScheduleRow:
    return named(ScheduleRow, r, args=msgspec.json.decode(r["args"]), enabled=bool(r["enabled"]),
                 allow_unattended=bool(r["allow_unattended"]),
                 declared=msgspec.json.decode(r["declared"]) if r["declared"] else None)


def _values(s: ScheduleRow) -> dict[str, Any]:
    values = {f: getattr(s, f) for f in _FIELDS}
    values["args"] = msgspec.json.encode(s.args).decode()
    values["enabled"] = int(s.enabled)
    values["allow_unattended"] = int(s.allow_unattended)
    values["declared"] = msgspec.json.encode(s.declared).decode() if s.declared is not None else None
    return values


class ScheduleRepo:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def get(self, schedule_id: str) -> ScheduleRow | None:
        row = await self.db.fetchone(f"SELECT {_COLS} FROM schedules WHERE id = ?", (schedule_id,))
        return _row(row) if row is not None else None

    async def all(self, *, chat_id: str | None = None, tool_id: str | None = None) -> list[ScheduleRow]:
        where: list[str] = []
        params: list[str] = []
        if chat_id is not None:
            where.append("chat_id = ?")
            params.append(chat_id)
        if tool_id is not None:
            where.append("tool_id = ?")
            params.append(tool_id)
        clause = f"WHERE {' AND '.join(where)}" if where else ""
        rows = await self.db.fetchall(f"SELECT {_COLS} FROM schedules {clause} ORDER BY created_at, id", params)
        return [_row(r) for r in rows]

    async def of_toolset(self, toolset_id: str) -> list[ScheduleRow]:
        """Schedules the toolset's manifest made, and any schedule of one of its tools."""
        rows = await self.db.fetchall(
            f"SELECT {_COLS} FROM schedules WHERE toolset_id = ? OR tool_id LIKE ? ESCAPE '\\' "
            "OR tool_id LIKE ? ESCAPE '\\'",
            (toolset_id, _like(toolset_id) + ":%", "mcp:" + _like(toolset_id) + "~%"))
        return [_row(r) for r in rows]

    async def put(self, s: ScheduleRow) -> None:
        """Insert or replace the whole row (``IntegrityError`` if a manifest already has one for its tool)."""
        values = _values(s)
        names = ", ".join(_FIELDS)
        holes = ", ".join(f":{f}" for f in _FIELDS)
        async with self.db.write() as w:
            await w.execute(f"INSERT OR REPLACE INTO schedules ({names}) VALUES ({holes})", values)

    async def delete(self, schedule_id: str) -> bool:
        async with self.db.write() as w:
            cursor = await w.execute("DELETE FROM schedules WHERE id = ?", (schedule_id,))
            return cursor.rowcount > 0

    async def delete_many(self, ids: list[str]) -> None:
        if ids:
            async with self.db.write() as w:
                await w.executemany("DELETE FROM schedules WHERE id = ?", [(i,) for i in ids])

    async def first_due(self) -> str | None:
        """The earliest ``next_run_at`` among schedules that may fire (one indexed read)."""
        row = await self.db.fetchone(
            f"SELECT next_run_at FROM schedules WHERE {_ACTIVE} AND next_run_at IS NOT NULL "
            "ORDER BY next_run_at LIMIT 1")
        return row["next_run_at"] if row is not None else None

    async def due(self, at: str) -> list[ScheduleRow]:
        rows = await self.db.fetchall(
            f"SELECT {_COLS} FROM schedules WHERE {_ACTIVE} AND next_run_at <= ? ORDER BY next_run_at, id", (at,))
        return [_row(r) for r in rows]

    async def set_next(self, nexts: list[tuple[str | None, str]]) -> None:
        """``(next_run_at, id)`` pairs, in one transaction."""
        if nexts:
            async with self.db.write() as w:
                await w.executemany("UPDATE schedules SET next_run_at = ? WHERE id = ?", nexts)

    async def ran(self, schedule_id: str, at: str, call_id: str | None, status: str, error: str | None) -> None:
        async with self.db.write() as w:
            await w.execute("UPDATE schedules SET last_run_at = ?, last_tool_call_id = ?, last_status = ?, "
                            "last_error = ? WHERE id = ?", (at, call_id, status, error, schedule_id))

    async def pause(self, schedule_id: str, reason: str) -> None:
        async with self.db.write() as w:
            await w.execute("UPDATE schedules SET paused_reason = ?, next_run_at = NULL, updated_at = ? WHERE id = ?",
                            (reason, now(), schedule_id))

    async def pause_orphans_of_chats(self) -> int:
        """Schedules whose chat was deleted are paused (said why), never dropped. The usual case
        (none) is one read, not a write."""
        if await self.db.fetchone(f"SELECT 1 FROM schedules WHERE {_ORPHANED} LIMIT 1") is None:
            return 0
        async with self.db.write() as w:
            cursor = await w.execute(
                "UPDATE schedules SET paused_reason = 'its chat ' || chat_id || ' was deleted; choose another chat "
                f"(or none) with schedules/update', next_run_at = NULL, updated_at = ? WHERE {_ORPHANED}", (now(),))
            return cursor.rowcount


_ORPHANED = ("chat_id IS NOT NULL AND paused_reason IS NULL "
             "AND NOT EXISTS (SELECT 1 FROM chats WHERE chats.id = schedules.chat_id)")


def _like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")

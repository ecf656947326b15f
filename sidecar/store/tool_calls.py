"""Tool calls: written when a call starts and again when it ends, never in between.

A call outside a chat changes nothing that lasts, so its record may be written after the reply
(``finish(later=True)``): records queue up and a background task writes them in one transaction
per batch. Reads and shutdown flush the queue first, so no reader misses one. Writing each record
before its reply would put a transaction (about 0.5 ms of thread hand-offs here, more while
another write holds the writer) on every call's reply; ``scripts/bench_mcp.py`` budgets 1 ms.
Every write here is one hand-off to the database's thread (``Database.write_whole``), not one per
statement: each hand-off wakes that thread and then the event loop, and a background batch written
statement by statement took those wake-ups from the calls being served (0.6 context switches per
call of a sequential series, against 0.15 now).

What a crash can lose (SIGKILL, power is another matter: WAL with synchronous=NORMAL): a record is
queued when its reply is sent, and its batch starts writing at most ``BATCH_WINDOW`` (50 ms) later,
or at once when ``MAX_QUEUED`` (256) records wait. So only the calls answered in the last 50 ms
before the kill, plus the time their batch waited for the database's writer and took to commit,
at most 256 + the batch being written, can be missing afterwards; batches are written in reply
order, so what survives is every call up to some point. ``tests/e2e/test_audit.py`` kills a real
sidecar to show it. A call in a chat, or one with ``on_started``, is written before it runs.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable
from typing import Any, Literal

import aiosqlite
import anyio
import msgspec
from anyio.abc import TaskGroup

from . import tool_usage
from .db import Database, Work
from .rows import named, now

log = logging.getLogger("sidecar.store")

# How long a queued record may wait for others to share its transaction, and how many may wait.
BATCH_WINDOW = 0.05
MAX_QUEUED = 256

_encode = msgspec.json.encode
_decode = msgspec.json.decode


ToolCallStatus = Literal["pending", "running", "success", "error"]
StartedBy = Literal["model", "palette", "api", "schedule"]
# How a call came to run without (or despite) asking: the tool needs no confirmation; the user
# answered this call's question (once, for the chat, always, or denied it); an earlier "allow
# for this chat" or "always" grant; the schedule's permission to run it unattended.
Confirmation = Literal["notNeeded", "userOnce", "userChat", "userAlways", "userDenied", "chatGrant",
                       "alwaysGrant", "schedule"]


class Initiator(msgspec.Struct, frozen=True, kw_only=True):
    """Who started a tool call, for the audit trail (``ToolCallService.call(origin=...)``)."""

    started_by: StartedBy
    schedule_id: str | None = None
    """The schedule that ran it (``started_by="schedule"``)."""
    confirmation: Confirmation | None = None
    """None: the user started the call themselves (palette, tools/call), nothing was asked."""


API = Initiator(started_by="api")
PALETTE = Initiator(started_by="palette")


class ToolCallRow(msgspec.Struct, kw_only=True):
    id: str
    tool_id: str
    chat_id: str | None
    message_id: str | None = None
    args: dict[str, Any]
    status: ToolCallStatus
    started_at: str
    result: Any = None
    error: str | None = None
    error_kind: str | None = None
    render_plan: dict[str, Any] | None = None
    pre_manifest_id: str | None = None
    post_manifest_id: str | None = None
    finished_at: str | None = None
    requests: list[dict[str, Any]] | None = None
    """What an HTTP tool sent: ``{method, url (secrets masked), status, durationMs}`` per request."""
    started_by: StartedBy = "api"
    schedule_id: str | None = None
    confirmation: Confirmation | None = None
    toolset_id: str | None = None
    provider: str | None = None
    duration_ms: float | None = None
    """How long the tool ran (from the start of its record to its end); None if it never ran."""

    def started(self, origin: Initiator) -> None:
        self.started_by, self.schedule_id, self.confirmation = (origin.started_by, origin.schedule_id,
                                                                origin.confirmation)


class ToolCallQuery(msgspec.Struct, kw_only=True, frozen=True):
    """Which records the audit trail reads: every field given must match; times as ``now()``
    writes them (``since`` inclusive, ``until`` exclusive)."""

    chat_id: str | None = None
    toolset_id: str | None = None
    tool_id: str | None = None
    provider: str | None = None
    status: str | None = None
    started_by: str | None = None
    schedule_id: str | None = None
    confirmation: str | None = None
    since: str | None = None
    until: str | None = None


# The filters, most selective first as calls usually spread: the first one given picks the index
# (each has one ending in (started_at, id)); the others are checked on the rows it yields. Without
# statistics (a new database) SQLite may pick the index of the least selective one instead: status
# for "errors in this chat" read 5,000 rows where the chat's index reads 50 (scripts/bench_audit.py).
_EQUAL = ("schedule_id", "chat_id", "tool_id", "toolset_id", "provider", "started_by", "status", "confirmation")
# Where a page begins: the (started_at, id) of the record before it, in the page's order.
Position = tuple[str, str]


def _where(q: ToolCallQuery, after: Position | None, newest_first: bool) -> tuple[str, list[Any]]:
    terms: list[str] = []
    params: list[Any] = []
    for name in _EQUAL:
        value = getattr(q, name)
        if value is not None:
            terms.append(f"{'+' if terms else ''}{name} = ?")  # unary +: no index for this term
            params.append(value)
    if q.since is not None:
        terms.append("started_at >= ?")
        params.append(q.since)
    if q.until is not None:
        terms.append("started_at < ?")
        params.append(q.until)
    if after is not None:
        terms.append(f"(started_at, id) {'<' if newest_first else '>'} (?, ?)")
        params.extend(after)
    return (" WHERE " + " AND ".join(terms)) if terms else "", params


_COLS = ("id, tool_id, chat_id, message_id, args, status, started_at, result, error, error_kind, "
         "render_plan, pre_manifest_id, post_manifest_id, finished_at, requests, started_by, schedule_id, "
         "confirmation, toolset_id, provider, duration_ms")


def _result_json(result: Any) -> Any:
    # A result still in the worker's JSON (``msgspec.Raw``) is stored as it is: sqlite takes any
    # buffer as a BLOB, like the bytes ``_encode`` makes, with no big encode on the event loop.
    if result is None:
        return None
    return result if isinstance(result, msgspec.Raw) else _encode(result)


def _row(r: aiosqlite.Row) -> ToolCallRow:
    result, plan, sent = r["result"], r["render_plan"], r["requests"]
    return named(ToolCallRow, r, args=_decode(r["args"]), result=_decode(result) if result is not None else None,
                 render_plan=_decode(plan) if plan else None, requests=_decode(sent) if sent else None)


_INSERT = ("INSERT INTO tool_calls (id, tool_id, chat_id, message_id, args, status, started_at, "
           "pre_manifest_id, started_by, schedule_id, confirmation, toolset_id, provider) "
           "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")


def _values(call: ToolCallRow) -> tuple[Any, ...]:
    return (call.id, call.tool_id, call.chat_id, call.message_id, _encode(call.args), call.status,
            call.started_at, call.pre_manifest_id, call.started_by, call.schedule_id, call.confirmation,
            call.toolset_id, call.provider)


def _writer(calls: list[ToolCallRow], inserted: bool) -> Callable[[sqlite3.Connection], None]:
    """How ``calls`` ended, as one transaction for ``Database.write_whole`` (``inserted``: ``start``
    wrote their rows; else whole rows). The values are made here, on the event loop."""
    outcomes = [(c.status, _result_json(c.result), c.error, c.error_kind,
                 _encode(c.render_plan) if c.render_plan else None, c.post_manifest_id, c.finished_at,
                 _encode(c.requests) if c.requests else None, c.duration_ms)
                for c in calls]
    if inserted:
        sql = ("UPDATE tool_calls SET status = ?, result = ?, error = ?, error_kind = ?, render_plan = ?, "
               "post_manifest_id = ?, finished_at = ?, requests = ?, duration_ms = ? WHERE id = ?")
        rows = [(*o, c.id) for c, o in zip(calls, outcomes, strict=True)]
    else:
        sql = ("INSERT INTO tool_calls (id, tool_id, chat_id, message_id, args, started_at, pre_manifest_id, "
               "started_by, schedule_id, confirmation, toolset_id, provider, "
               "status, result, error, error_kind, render_plan, post_manifest_id, finished_at, requests, "
               "duration_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
        rows = [(c.id, c.tool_id, c.chat_id, c.message_id, _encode(c.args), c.started_at, c.pre_manifest_id,
                 c.started_by, c.schedule_id, c.confirmation, c.toolset_id, c.provider, *o)
                for c, o in zip(calls, outcomes, strict=True)]
    usage = tool_usage.counts(calls)

    def write(conn: sqlite3.Connection) -> None:
        conn.executemany(sql, rows)
        if usage:  # same transaction: usage never disagrees with the records
            conn.executemany(tool_usage.UPSERT, usage)

    return write


class ToolCallRepo:
    def __init__(self, db: Database) -> None:
        self.db = db
        self._queued: list[ToolCallRow] = []
        self._queued_done = anyio.Event()  # set once the queued batch is written
        self._writing: anyio.Event | None = None  # the batch being written, if any
        self._wake = anyio.Event()
        self._hurry = anyio.Event()  # a reader is waiting: write now
        self._draining = False

    def bind(self, tg: TaskGroup) -> None:
        """Write ``later`` records in the background from now on (until ``aclose``)."""
        self._draining = True
        tg.start_soon(self._drain)

    async def start(self, call: ToolCallRow) -> None:
        await self.db.write_whole(self.starting(call))

    def starting(self, call: ToolCallRow) -> Work:
        """``start`` as a statement for a transaction of someone else's (the read of the call's
        chat under its lock: one trip to the database's thread for both)."""
        values = _values(call)

        def insert(conn: sqlite3.Connection) -> None:
            conn.execute(_INSERT, values)

        return insert

    async def finish(self, call: ToolCallRow, *, inserted: bool = True, later: bool = False) -> None:
        """Record how the call ended (``inserted``: ``start`` wrote its row; else the whole row;
        ``later``: a row not inserted yet may be written after this returns)."""
        call.finished_at = call.finished_at or now()
        if later and not inserted and self._draining:
            self._queued.append(call)
            self._wake.set()
            if len(self._queued) >= MAX_QUEUED:
                self._hurry.set()
            return
        await self.db.write_whole(self.finishing(call, inserted=inserted))

    def finishing(self, call: ToolCallRow, *, inserted: bool = True) -> Work:
        """``finish`` as statements for a transaction of someone else's (the workspace version the
        call made, adopted in the same trip to the database's thread); the record as it is now."""
        call.finished_at = call.finished_at or now()
        return _writer([call], inserted)

    async def flush(self) -> None:
        """Return once every record queued so far is written."""
        if self._queued:
            self._hurry.set()
            await self._queued_done.wait()
        elif self._writing is not None:
            await self._writing.wait()

    async def aclose(self) -> None:
        self._draining = False
        self._wake.set()
        self._hurry.set()
        await self.flush()

    async def _drain(self) -> None:
        while self._draining or self._queued:
            await self._wake.wait()
            self._wake = anyio.Event()
            if not self._queued:
                continue
            if self._draining and not self._hurry.is_set():
                # Let a burst of calls gather into one transaction, away from their replies.
                with anyio.move_on_after(BATCH_WINDOW):
                    await self._hurry.wait()
            self._hurry = anyio.Event()
            batch, done = self._queued, self._queued_done
            self._queued, self._queued_done, self._writing = [], anyio.Event(), done
            try:
                with anyio.CancelScope(shield=True):
                    await self.db.write_whole(_writer(batch, inserted=False))
            except Exception:  # the writer must outlive a bad batch; the calls were answered already
                log.exception("%d tool call records could not be written", len(batch))
            finally:
                self._writing = None
                done.set()


    async def for_chat(self, chat_id: str) -> list[ToolCallRow]:
        await self.flush()
        rows = await self.db.fetchall(
            f"SELECT {_COLS} FROM tool_calls WHERE chat_id = ? ORDER BY started_at, id", (chat_id,))
        return [_row(r) for r in rows]

    async def page(self, q: ToolCallQuery, limit: int, after: Position | None = None, *,
                   newest_first: bool = True, results: bool = True) -> list[ToolCallRow]:
        """Up to ``limit`` records past ``after`` in (started_at, id) order: keyset paging on
        indexes that end in that order, so a page costs the same however deep it is.
        ``results``: False leaves result and render plan unread (None)."""
        await self.flush()
        where, params = _where(q, after, newest_first)
        cols = _COLS if results else _COLS.replace("result, ", "").replace("render_plan, ", "")
        order = "DESC" if newest_first else "ASC"
        rows = await self.db.fetchall(
            f"SELECT {cols} FROM tool_calls{where} ORDER BY started_at {order}, id {order} LIMIT ?", (*params, limit))
        if results:
            return [_row(r) for r in rows]
        return [named(ToolCallRow, r, args=_decode(r["args"]),
                      requests=_decode(r["requests"]) if r["requests"] else None) for r in rows]

    async def count(self, q: ToolCallQuery) -> int:
        await self.flush()
        where, params = _where(q, None, True)
        row = await self.db.fetchone(f"SELECT count(*) FROM tool_calls{where}", params)
        return row[0] if row is not None else 0

    async def get(self, call_id: str) -> ToolCallRow | None:
        await self.flush()
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

"""The audit trail (seed 004 "Audit Trail"): the tool call records, listed a page at a time or
exported to a file, with every secret masked the way records of calls show them
(``secrets.mask_json`` for arguments and results, ``secrets.clean`` for error text).

Pages are keyset pages on (started_at, id), newest first (their tokens: ``sidecar.paging``). An
export walks the same order oldest first in chunks, masks each chunk in slices between checkpoints,
writes it in a worker thread, and renames the finished file over the target: memory stays at one
chunk however many calls there are.
"""

from __future__ import annotations

import csv
import io
import os
import tempfile
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import anyio
import anyio.lowlevel
import anyio.to_thread
import msgspec

from .. import secrets
from ..api.tool_calls import (
    ExportFormat,
    ExportToolCallsParams,
    ExportToolCallsResult,
    ListToolCallsParams,
    ToolCall,
    ToolCallFilter,
    ToolCallsResult,
)
from ..errors import InvalidParams, StorageError
from ..paging import Pages
from ..store.rows import now
from ..store.tool_calls import Position, ToolCallQuery, ToolCallRepo, ToolCallRow

# Records read at a time, and masked and encoded at a time on the event loop between checkpoints:
# about 2-3 ms each here. (In a worker thread they would hold the GIL in 5 ms turns against the
# loop: ping p50 went from 0.45 to 6.5 ms during an export of 100,000 calls.)
EXPORT_CHUNK = 100
MASK_SLICE = 50
PROGRESS_EVERY = 500  # calls written between progress reports

# (calls written so far, calls the export holds) after each chunk.
OnProgress = Callable[[int, int], Awaitable[None]]

CSV_COLUMNS = ("id", "startedAt", "finishedAt", "durationMs", "status", "errorKind", "error", "toolId",
               "toolsetId", "provider", "startedBy", "scheduleId", "confirmation", "chatId", "messageId",
               "args", "result")
# A spreadsheet runs a cell that starts like a formula: such a text cell gets a leading quote.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


class AuditTrail:
    def __init__(self, repo: ToolCallRepo, data_dir: Path) -> None:
        self.repo = repo
        self.data_dir = data_dir  # no export lands in it: it would replace the database, a blob, ...

    async def list(self, p: ListToolCallsParams) -> ToolCallsResult:
        query = _query(p)
        pages = Pages("toolCalls/list", query, Position)
        rows = await self.repo.page(query, p.page_size + 1, pages.after(p.page_token), results=p.with_results)
        rows, token = pages.page(rows, p.page_size, lambda r: (r.started_at, r.id))
        calls: list[ToolCall] = []
        for i in range(0, len(rows), MASK_SLICE):  # a page of 500 with results: not all in one go
            if i:
                await anyio.lowlevel.checkpoint()
            calls += [shown(r) for r in rows[i:i + MASK_SLICE]]
        return ToolCallsResult(calls, token)

    async def export(self, p: ExportToolCallsParams, on_progress: OnProgress | None = None) -> ExportToolCallsResult:
        target = await anyio.to_thread.run_sync(_target, p.path, self.data_dir)
        fmt: ExportFormat = p.format or ("csv" if target.suffix.lower() == ".csv" else "jsonl")
        query = _query(p)
        if query.until is None:  # calls made while the export runs are not in it: it ends
            query = msgspec.structs.replace(query, until=now())
        total = await self.repo.count(query) if on_progress is not None else 0
        out = await anyio.to_thread.run_sync(_Part, target)
        count = 0
        try:
            if fmt == "csv":
                await anyio.to_thread.run_sync(_write, out, _csv_lines([], header=True))
            after: Position | None = None
            reported = 0
            while True:
                rows = await self.repo.page(query, EXPORT_CHUNK, after, newest_first=False)
                if not rows:
                    break
                data: list[bytes] = []
                for i in range(0, len(rows), MASK_SLICE):
                    await anyio.lowlevel.checkpoint()
                    data.append(_encoded([shown(r) for r in rows[i:i + MASK_SLICE]], fmt))
                await anyio.to_thread.run_sync(_write, out, b"".join(data))
                count += len(rows)
                after = (rows[-1].started_at, rows[-1].id)
                if on_progress is not None and count - reported >= PROGRESS_EVERY:
                    reported = count
                    await on_progress(count, max(total, count))
            if on_progress is not None and count > reported:
                await on_progress(count, max(total, count))
            await anyio.to_thread.run_sync(_commit, out, target)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(_discard, out)
            raise
        return ExportToolCallsResult(str(target), count, fmt)


def shown(row: ToolCallRow) -> ToolCall:
    """A record as the audit trail shows it: every secret in it masked."""
    call = msgspec.convert(row, ToolCall, from_attributes=True)
    call.args = secrets.mask_json(call.args)
    if call.result is not None:
        call.result = secrets.mask_json(call.result)
    if call.error is not None:
        call.error = secrets.clean(call.error)
    if call.requests:
        for sent in call.requests:
            sent.url = secrets.clean(sent.url)
    if call.render_plan is not None:
        call.render_plan = msgspec.convert(secrets.mask_json(msgspec.to_builtins(call.render_plan)),
                                           type(call.render_plan))
    return call


# -- filters and pages -------------------------------------------------------------------------


def _query(p: ToolCallFilter) -> ToolCallQuery:
    since = _instant(p.since, "params.since") if p.since is not None else None
    until = _instant(p.until, "params.until") if p.until is not None else None
    if since is not None and until is not None and since >= until:
        raise InvalidParams("params.until", f"until ({p.until}) must be later than since ({p.since})")
    return ToolCallQuery(chat_id=p.chat_id, toolset_id=p.toolset_id, tool_id=p.tool_id, provider=p.provider,
                         status=p.status, started_by=p.started_by, schedule_id=p.schedule_id,
                         confirmation=p.confirmation, since=since, until=until)


def _instant(value: str, path: str) -> str:
    """An ISO 8601 time as the records store theirs (UTC, microseconds, ``Z``), so it compares as text."""
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        raise InvalidParams(path, f"{value!r} is not an ISO 8601 date-time; write e.g. 2026-11-23T10:00:00Z "
                                  "or 2026-11-23") from None
    if when.tzinfo is None:
        if len(value) > 10:  # a time of day with no zone could mean any of 24 hours
            raise InvalidParams(path, f"{value!r} has no timezone; add Z (UTC) or an offset such as +01:00")
        when = when.replace(tzinfo=UTC)
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# -- the export file ---------------------------------------------------------------------------


def _target(path: str, data_dir: Path) -> Path:
    if "\x00" in path or not path.strip():
        raise InvalidParams("params.path", "give the absolute path of the file to write")
    target = Path(path)
    if not target.is_absolute():
        raise InvalidParams("params.path", f"{path!r} is relative; give an absolute path, e.g. "
                                           "/home/me/tool-calls.jsonl")
    if target.is_dir():
        raise InvalidParams("params.path", f"{path} is a folder; name a file in it, e.g. {target / 'tool-calls.jsonl'}")
    if not target.parent.is_dir():
        raise InvalidParams("params.path", f"the folder {target.parent} does not exist; create it first")
    # Resolved (symlinks, ..) before the check: the file that would really be replaced.
    if (target.parent.resolve() / target.name).is_relative_to(data_dir.resolve()):
        raise InvalidParams("params.path", f"{path} is inside the sidecar's data directory ({data_dir}), whose "
                                           "files only the sidecar writes; export to another folder")
    return target


class _Part:
    """The file an export is written to, beside its target until it is complete."""

    def __init__(self, target: Path) -> None:
        try:
            fd, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
        except PermissionError:
            raise InvalidParams("params.path", f"the folder {target.parent} is not writable; pick another") from None
        except OSError as exc:
            raise StorageError(f"cannot write the export in {target.parent}: {exc.strerror}") from exc
        self.path = Path(name)
        self.file: IO[bytes] = os.fdopen(fd, "wb")


def _write(out: _Part, data: bytes) -> None:
    try:
        out.file.write(data)
    except OSError as exc:
        raise StorageError(f"writing the export failed: {exc.strerror}") from exc


def _encoded(calls: list[ToolCall], fmt: ExportFormat) -> bytes:
    if fmt == "csv":
        return _csv_lines(calls)
    return b"".join(msgspec.json.encode(c) + b"\n" for c in calls)


def _commit(out: _Part, target: Path) -> None:
    try:
        out.file.flush()
        os.fsync(out.file.fileno())  # the rename must not land before the data (a crash: old file or new)
        out.file.close()
        os.replace(out.path, target)
    except OSError as exc:
        raise StorageError(f"writing the export to {target} failed: {exc.strerror}") from exc


def _discard(out: _Part) -> None:
    out.file.close()
    out.path.unlink(missing_ok=True)


def _csv_lines(calls: list[ToolCall], *, header: bool = False) -> bytes:
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\r\n")
    if header:
        writer.writerow(CSV_COLUMNS)
    for c in calls:
        writer.writerow([_cell(v) for v in (
            c.id, c.started_at, c.finished_at, c.duration_ms, c.status, c.error_kind, c.error, c.tool_id,
            c.toolset_id, c.provider, c.started_by, c.schedule_id, c.confirmation, c.chat_id, c.message_id,
            msgspec.json.encode(c.args).decode(),
            msgspec.json.encode(c.result).decode() if c.result is not None else None)])
    return text.getvalue().encode("utf-8")


def _cell(value: Any) -> Any:
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return "" if value is None else value

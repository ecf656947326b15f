"""One tool call, the way seed 000 §4.3 runs it: lock the chat, bring its workspace in line,
run the tool, snapshot the workspace (also after a failure), plan the rendering, record it all.

Every kind of tool goes through here (built-ins in the sidecar, Python tools in their toolset's
worker, HTTP tools, MCP servers' tools), so arguments, workspace versions and the ``tool_calls``
record behave the same for all: the tool is resolved once, then run by its provider's runner
(``runner.ToolRunner``, wired in ``compose``).
"""

from __future__ import annotations

import logging
import os
import shutil
import sqlite3
import tempfile
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
import msgspec
from anyio.abc import TaskGroup

from ..api.tool_calls import ClientContext
from ..errors import Conflict, InvalidParams, NotFound, StorageError
from ..store import Database
from ..store.db import Work
from ..store.rows import new_id, now
from ..store.tool_calls import API, Initiator, ToolCallRepo, ToolCallRow
from . import cards, result_schema
from .catalog import Catalog
from .config import ToolConfig
from .providers.python.worker import decode_result
from .render import RenderError, load_artifact_page, render_plan
from .resolved import Resolved
from .runner import OnProgress, Run, ToolFailed, ToolRunner
from .switch import Killed, ToolSwitch
from .validate import check_args

if TYPE_CHECKING:
    from ..workspace.service import WorkspaceService

log = logging.getLogger("sidecar.tools")

BIG_CARD = 64 * 1024  # characters of card HTML sanitised off the event loop

# Called once the call is recorded as running (a chat turn tells the UI at that point).
OnStarted = Callable[[ToolCallRow], Awaitable[None]]
# The runner of each provider (``compose``): "builtin", "python", "http", "mcp".
Runners = Mapping[str, ToolRunner]


class ToolCallService:
    def __init__(self, db: Database, workspace: WorkspaceService, runners: Runners, scratch: Path,
                 catalog: Catalog, config: ToolConfig, switch: ToolSwitch) -> None:
        self.db = db
        self._switch = switch  # the user's kill switch: off, no call starts and running ones stop
        self._runners = runners
        self._workspace = workspace
        self.repo = ToolCallRepo(db)  # the records (audit trail, listing and chat history read them)
        self._scratch = scratch
        self._catalog = catalog
        self._config = config

    def bind(self, tg: TaskGroup) -> None:
        self.repo.bind(tg)

    async def aclose(self) -> None:
        await self.repo.aclose()

    async def resolve(self, ref: str) -> Resolved:
        """The tool ``ref`` names: an id, or what the "+" palette gives (``+slug``,
        ``+slug@version``), resolved once to be checked (`check`) and handed to `call`."""
        return await self._catalog.resolve(await self._catalog.tool_for(ref))

    def check(self, target: Resolved, args: dict[str, Any], chat_id: str | None, *,
              allow_disabled: bool | None = False) -> None:
        """Refuse a call that cannot run, before any lock, record or worker: tools switched off,
        the tool unavailable or disabled (``allow_disabled``: see `call`; None: not checked here),
        its configuration missing, arguments its schema refuses, no chat for a tool that needs one."""
        self._switch.check()
        tool = target.tool
        if tool.unavailable_reason is not None:  # its provider went away: kept to be seen, never run
            raise Conflict("tool unavailable", f"the tool {tool.id!r} cannot run: {tool.unavailable_reason}")
        if allow_disabled is not None and not tool.enabled and not (allow_disabled and target.switched_on):
            raise Conflict("tool disabled", f"the tool {tool.id!r} is disabled; enable it (tools/setOverride "
                                            "or toolsets/setEnabled) to run it")
        self._config.check_ready(tool.id, target.settings)
        check_args(tool.input_schema, args)
        if chat_id is None and target.config.needs_workspace:
            raise InvalidParams("params.chatId", f"{tool.id} works on a chat's workspace files; pass the chatId")

    async def call(
        self, tool: Resolved | str, args: dict[str, Any], chat_id: str | None, *,
        message_id: str | None = None, on_started: OnStarted | None = None,
        on_progress: OnProgress | None = None, call_id: str | None = None, allow_disabled: bool = False,
        raw_result: bool = False, client_context: ClientContext | None = None, origin: Initiator = API,
    ) -> ToolCallRow:
        """The one way a tool runs (tools/call, the "+" palette, a model in a chat turn, a
        schedule): ``tool`` as `resolve` gave it, or its id or palette ref to resolve here.
        ``allow_disabled``: a tool a chat got from an attachment runs even when its toolset is
        off globally (seed 003); one the user switched off itself never runs. ``raw_result``: the
        caller only stores and sends the result, so a Python tool's may stay as its JSON
        (``msgspec.Raw``): a big one then never holds the event loop while it is built and
        encoded again. ``client_context``: what the UI said of the user's time and place (a
        Python tool's ``telemetry``). ``origin``: who started the call and how it was confirmed,
        as the audit trail shows it."""
        target = tool if isinstance(tool, Resolved) else await self._resolve_checked(tool)
        # A tool still missing its configuration fails here, before any lock, record or worker.
        self.check(target, args, chat_id, allow_disabled=allow_disabled)
        settings = await self._config.settings(target.tool.id, target.settings) if target.settings is not None else None
        record = _record(target, args, chat_id, message_id, call_id, origin)
        runner = self._runners.get(target.tool.provider, _NO_RUNNER)
        call = Run(args, chat_id, record.id, settings, client_context, on_progress, raw_result)
        # A call in a chat is recorded when it starts (a crash leaves it as interrupted) and when it
        # ends; one outside a chat touches nothing that lasts, so one write at the end will do.
        durable = chat_id is not None or on_started is not None
        ending = _Ending(self, target, runner, record)
        try:
            async with self._folder(chat_id, record, runner.scratch, ending) as call.workspace:
                if durable and not ending.inserted:
                    await self.repo.start(record)
                ending.started = True
                if on_started is not None:
                    await on_started(record)
                await self._run(target, runner, call, record)
        finally:
            # Written after the snapshot (taken as the workspace context closes), also when the
            # call was cancelled; not when it never got recorded as started. In a chat, with the
            # version the snapshot made, in its transaction (``_Ending``).
            if ending.started and not ending.written:
                record.duration_ms = ending.duration_ms()
                with anyio.CancelScope(shield=True):
                    await self._plan_record(target, runner, record, call.workspace)
                    await self.repo.finish(record, inserted=durable, later=record.chat_id is None)
        return record

    async def _resolve_checked(self, ref: str) -> Resolved:
        tool_id = await self._catalog.tool_for(ref)
        self._switch.check()  # off: refused before the tool is looked up, as after it
        return await self._catalog.resolve(tool_id)

    async def _run(self, target: Resolved, runner: ToolRunner, call: Run, record: ToolCallRow) -> None:
        """Run the tool under the kill switch and put the outcome on the record."""
        try:
            result = await self._switch.run(runner.run, target, call)
            await self._succeeded(target, record, result)
        except ToolFailed as failure:
            record.status, record.error, record.error_kind = "error", failure.message, failure.kind
            record.result = failure.result
        except Killed:
            record.status, record.error, record.error_kind = "error", Killed.message, "killed"
        except BaseException:
            record.status, record.error, record.error_kind = "error", "the call was cancelled", "cancelled"
            raise
        finally:
            record.requests = call.sent or None

    async def _succeeded(self, target: Resolved, record: ToolCallRow, result: Any) -> None:
        """A result the tool returned: kept as it came unless something here reads it; still an
        error when the tool's card says so or it breaks the tool's output schema."""
        tool, output = target.tool, target.config.output
        raw = result if isinstance(result, msgspec.Raw) else None
        read = tool.renderer is not None or output.shows_card  # for $return, or for a card
        if raw is not None:
            result = await _settle(raw, needed=read or tool.output_schema is not None)
        record.result = result
        record.status = "success"
        if (reported := cards.error_of(output, result)) is not None:
            # Seed 004: a card tool says it failed with {"error": ...}; the call is an error.
            record.status, record.error, record.error_kind = "error", reported, "raised"
        elif tool.output_schema is not None:
            size = len(raw) if raw is not None else None
            if wrong := await result_schema.check(tool.output_schema, tool.provider, result, size):
                # Seed 002: a result that breaks the tool's output schema fails the call; the
                # model is told where and what was expected, the record keeps what came back.
                record.status, record.error, record.error_kind = "error", wrong, result_schema.BAD_OUTPUT
            elif raw is not None and not read:
                record.result = await _settle(raw, needed=False)  # sent on as it came

    async def history(self, chat_id: str) -> list[ToolCallRow]:
        """The chat's tool calls as recorded (a turn rebuilds the model's context from them)."""
        return await self.repo.for_chat(chat_id)

    async def record_refused(self, record: ToolCallRow) -> None:
        """Keep a call that never ran (denied by the user, unknown tool, bad arguments) in the
        history like any other, so the chat shows it and the model's context can be rebuilt."""
        record.status = "error"
        await self.repo.finish(record, inserted=False)

    @asynccontextmanager
    async def _folder(self, chat_id: str | None, record: ToolCallRow, scratch: bool,
                      ending: _Ending) -> AsyncGenerator[Path | None, None]:
        """The call's cwd: the chat's workspace, in line with its active version and locked, then
        snapshotted (also after a failure), the record's end (``ending``) written with the version;
        outside a chat, a scratch folder when the runner wants one (``scratch``: Python workers;
        MCP servers never see our folders)."""
        if chat_id is None:
            if not scratch:
                yield None
                return
            # Python tools get a cwd even outside a chat; whatever they leave there is dropped.
            folder = await anyio.to_thread.run_sync(self._make_scratch, record.toolset_id or "_")
            try:
                yield folder
            finally:
                await anyio.to_thread.run_sync(shutil.rmtree, folder, True)
            return
        async with self._workspace.locked(chat_id, ending.start_with) as (ws, chat):
            if not ws.in_sync:
                await self._workspace.capture(ws, chat)  # outside edits become a version of their own
            record.pre_manifest_id = ws.active_manifest_id
            try:
                yield ws.tree.root
            finally:
                manifest = None  # (stays so only if the capture raised, and then this is unwinding)
                with anyio.CancelScope(shield=True):
                    also = await ending.prepare(ws.tree.root)
                    try:
                        manifest = await self._workspace.capture(ws, chat, "tool_run", record.id, also)
                    except BaseException:
                        record.post_manifest_id = record.finished_at = None  # not written: call() writes it
                        raise
                    ending.written = also is not None
                record.post_manifest_id = manifest.id if manifest else ws.active_manifest_id

    def _make_scratch(self, toolset_id: str) -> Path:
        # One root per toolset, each call a folder of its own in it: the root is what a worker's
        # sandbox binds, so one warm worker serves every call of the toolset made outside a chat.
        root = self._scratch / toolset_id
        root.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix="call-", dir=root))

    async def _plan_record(self, target: Resolved, runner: ToolRunner, record: ToolCallRow,
                           workspace: Path | None) -> None:
        """Put how the ended call is shown on its record: its card, else its render plan."""
        output = target.config.output
        card = None
        if output.shows_card and record.status == "success":
            # The sanitiser takes about 1 ms per 100 KB of ordinary HTML: a big card goes to a thread.
            big = len((cards.fields(record.result) or {}).get("html") or "") > BIG_CARD
            card = (await anyio.to_thread.run_sync(cards.plan, output, record.args, record.result) if big
                    else cards.plan(output, record.args, record.result))
        record.render_plan = card or self._plan(target, runner, record, workspace)

    def _plan(self, target: Resolved, runner: ToolRunner, record: ToolCallRow,
              workspace: Path | None) -> dict[str, Any] | None:
        tool = target.tool
        if tool.renderer is None:  # its provider may show a result by what it holds (MCP content)
            return runner.plan(record.result) if record.status == "success" else None
        try:
            return render_plan(
                tool.renderer, tool.renderer_config, args=record.args, result=record.result,
                chat_id=record.chat_id, workspace=workspace if record.chat_id else None,
                toolset_dir=Path(target.toolset_dir) if target.toolset_dir else None)
        except RenderError as exc:
            # The call itself is fine; the UI falls back to showing the raw result.
            log.warning("no render plan for %s: %s", tool.id, exc)
            return None


    async def html_page(self, call_id: str) -> str:
        record = await self.repo.get(call_id)
        if record is None:
            raise NotFound("tool call", call_id)
        plan = record.render_plan
        if not plan or plan.get("renderer") != "html":
            raise InvalidParams("params.toolCallId", "this tool call has no html render plan")
        # The toolset's folder as stored now (a soft-deleted toolset keeps its files): what the
        # artifact must still be inside when it is read.
        current = await self._catalog.files_dir(record.tool_id)
        if current is None:
            raise StorageError(f"the artifact of tool call {call_id} is gone: its toolset was uninstalled")
        try:
            return await anyio.to_thread.run_sync(_page, plan, current)
        except RenderError as exc:
            raise StorageError(str(exc)) from None


def _record(target: Resolved, args: dict[str, Any], chat_id: str | None, message_id: str | None,
            call_id: str | None, origin: Initiator) -> ToolCallRow:
    """The record of a call about to start."""
    tool = target.tool
    record = ToolCallRow(id=call_id or new_id(), tool_id=tool.id, chat_id=chat_id, message_id=message_id, args=args,
                         status="running", started_at=now(), toolset_id=tool.toolset_id, provider=tool.provider)
    record.started(origin)
    return record


def _page(plan: dict[str, Any], current: str) -> str:
    """The page from the revision folder the plan named while it is there, else from the same
    place in the toolset's current folder (an upgrade replaced the old one)."""
    artifact = Path(plan["config"]["artifact"])
    now = Path(os.path.realpath(current))
    revisions = now.parent
    if artifact.is_relative_to(now) or not artifact.is_relative_to(revisions):
        return load_artifact_page(plan, now)  # refused there if it is not inside
    inside = artifact.relative_to(revisions).parts
    named = revisions / inside[0]
    if os.path.isdir(named) and not os.path.islink(named):
        return load_artifact_page(plan, named)
    moved = now.joinpath(*inside[1:])
    return load_artifact_page({**plan, "config": {**plan["config"], "artifact": str(moved)}}, now)


class _Ending:
    """The end of a started call's record. In a chat it is written in the transaction that adopts
    the workspace version the call left (``Versions.capture(also=...)``): one trip to the
    database's thread for both, not two. If that snapshot fails, or outside a chat, ``call``
    writes it on its own (outside a chat after the reply: nothing waits on it)."""

    def __init__(self, service: ToolCallService, target: Resolved, runner: ToolRunner, record: ToolCallRow) -> None:
        self._service, self._target, self._runner, self._record = service, target, runner, record
        self._began = time.perf_counter()
        self.inserted = False  # its start was written with the read of its chat (``start_with``)
        self.started = False  # the call is recorded as started: its end is to be written
        self.written = False  # its end went with the snapshot's version

    def start_with(self, version: str | None) -> Work:
        """The record's start, for the transaction that reads its chat under the workspace's
        lock, when the folder holds ``version`` and needs nothing done first."""
        record = self._record
        record.pre_manifest_id = version
        insert = self._service.repo.starting(record)

        def work(conn: sqlite3.Connection) -> None:
            insert(conn)
            self.inserted = True  # (a failed COMMIT raises out of the lock: the call never starts)

        return work

    def duration_ms(self) -> float:
        return round((time.perf_counter() - self._began) * 1000, 3)

    async def prepare(self, workspace: Path) -> Callable[[str | None], Work] | None:
        """Before the snapshot: the record's plan, and what writes its end once the version the
        workspace holds is known (None: nothing to write, the call never started)."""
        if not self.started:
            return None
        await self._service._plan_record(self._target, self._runner, self._record, workspace)  # noqa: SLF001
        return self._end

    def _end(self, version: str | None) -> Work:
        record = self._record
        record.post_manifest_id = version
        record.duration_ms = self.duration_ms()  # the snapshot's scan included
        return self._service.repo.finishing(record)


_NULL = msgspec.Raw(b"null")


async def _settle(result: msgspec.Raw, *, needed: bool) -> Any:
    """The result as it is kept on the record: built when something here reads it, None for
    ``null`` (a record leaves out a None result, never so a ``Raw`` one), else the JSON as it is."""
    if needed:
        return await decode_result(result)
    return None if result == _NULL else result


class _NoRunner(ToolRunner):
    """For a tool whose provider nothing here runs (a row from a newer version): its call fails."""

    async def run(self, target: Resolved, call: Run) -> Any:
        raise ToolFailed(f"tools of provider {target.tool.provider!r} cannot be run here", "load")


_NO_RUNNER = _NoRunner()

"""One tool call, the way seed 000 §4.3 runs it: lock the chat, bring its workspace in line,
run the tool, snapshot the workspace (also after a failure), plan the rendering, record it all.

Every kind of tool goes through here (built-ins in the sidecar, Python tools in their toolset's
worker), so arguments, workspace versions and the ``tool_calls`` record behave the same for all.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
import msgspec
from anyio.abc import TaskGroup

from .. import secrets
from ..api.toolsets import ClientContext
from ..errors import Conflict, InvalidParams, McpError, NotFound, StorageError
from ..mcp_host.state import CallOrigin
from ..sandbox.policy import DEFAULT as DEFAULT_CONFINEMENT
from ..store import Database
from ..store.rows import new_id, now
from ..store.tool_calls import API, Initiator, ToolCallRepo, ToolCallRow
from . import cards, mcp_plans, result_schema
from . import output as tool_output
from .catalog import Catalog
from .config import ToolConfig
from .providers.builtin import BUILTINS, BuiltinCall, BuiltinError
from .providers.http.runner import HttpCall, HttpFailure, HttpTools
from .providers.python.worker import ToolFailure, decode_result
from .render import RenderError, load_artifact_page, render_plan
from .resolved import Resolved
from .switch import Killed, ToolSwitch
from .telemetry import telemetry
from .validate import check_args

if TYPE_CHECKING:
    from ..workspace.service import WorkspaceService
    from .providers.python.workers import WorkerHost

log = logging.getLogger("sidecar.tools")

BIG_CARD = 64 * 1024  # characters of card HTML sanitised off the event loop

# Called once the call is recorded as running (a chat turn tells the UI at that point).
OnStarted = Callable[[ToolCallRow], Awaitable[None]]
# (progress, total or None, message or None) as a tool reports it.
OnProgress = Callable[[float, "float | None", "str | None"], Awaitable[None]]


class ToolCallService:
    def __init__(self, db: Database, workspace: WorkspaceService, workers: WorkerHost, scratch: Path,
                 catalog: Catalog, config: ToolConfig, http: HttpTools, switch: ToolSwitch) -> None:
        self.db = db
        self.switch = switch  # the user's kill switch: off, no call starts and running ones stop
        self.http = http
        self.workspace = workspace
        self.workers = workers
        self.repo = ToolCallRepo(db)
        self.scratch = scratch
        self.catalog = catalog
        self.config = config

    def bind(self, tg: TaskGroup) -> None:
        self.repo.bind(tg)

    async def aclose(self) -> None:
        await self.repo.aclose()

    async def call(
        self, tool_id: str, args: dict[str, Any], chat_id: str | None, *,
        message_id: str | None = None, on_started: OnStarted | None = None,
        on_progress: OnProgress | None = None, call_id: str | None = None, allow_disabled: bool = False,
        raw_result: bool = False, client_context: ClientContext | None = None, origin: Initiator = API,
    ) -> ToolCallRow:
        """``allow_disabled``: a tool a chat got from an attachment runs even when its toolset is
        off globally (seed 003); one the user switched off itself never runs. ``raw_result``: the
        caller only stores and sends the result, so a Python tool's may stay as its JSON
        (``msgspec.Raw``): a big one then never holds the event loop while it is built and
        encoded again. ``client_context``: what the UI said of the user's time and place (a
        Python tool's ``telemetry``). ``origin``: who started the call and how it was confirmed,
        as the audit trail shows it."""
        self.switch.check()
        target = await self.catalog.resolve(tool_id)
        tool_id = target.tool.id  # canonical, also when a legacy MCP id was given
        tool = target.tool
        if tool.unavailable_reason is not None:  # its provider went away: kept to be seen, never run
            raise Conflict("tool unavailable", f"the tool {tool_id!r} cannot run: {tool.unavailable_reason}")
        if not tool.enabled and not (allow_disabled and target.switched_on):
            raise Conflict("tool disabled", f"the tool {tool_id!r} is disabled; enable it (tools/setOverride "
                                            "or toolsets/setEnabled) to run it")
        # A tool still missing its configuration fails here, before any lock, record or worker.
        self.config.check_ready(tool_id, target.settings)
        check_args(tool.input_schema, args)
        settings = await self.config.settings(tool_id, target.settings) if target.settings is not None else None
        needs_workspace = bool(target.config.get("needs_workspace"))
        output = tool_output.of_config(target.config)
        if chat_id is None and needs_workspace:
            raise InvalidParams("params.chatId", f"{tool_id} works on a chat's workspace files; pass the chatId")
        record = ToolCallRow(id=call_id or new_id(), tool_id=tool_id, chat_id=chat_id, message_id=message_id,
                             args=args, status="running", started_at=now(), toolset_id=tool.toolset_id,
                             provider=tool.provider)
        record.started(origin)
        began = time.perf_counter()
        # A call in a chat is recorded when it starts (a crash leaves it as interrupted) and when it
        # ends; one outside a chat touches nothing that lasts, so one write at the end will do.
        durable = chat_id is not None or on_started is not None
        workspace: Path | None = None
        started = False
        try:
            async with self._workspace(chat_id, record, tool.provider == "python") as workspace:
                if durable:
                    await self.repo.start(record)
                started = True
                if on_started is not None:
                    await on_started(record)
                call = _Call(args, workspace, chat_id, record.id, settings, client_context)
                try:
                    result = await self.switch.run(self._run, target, call, on_progress, raw_result)
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
                            record.status, record.error, record.error_kind = ("error", wrong,
                                                                              result_schema.BAD_OUTPUT)
                        elif raw is not None and not read:
                            record.result = await _settle(raw, needed=False)  # sent on as it came
                except _Failed as failure:
                    record.status, record.error, record.error_kind = "error", failure.message, failure.kind
                    record.result = failure.result
                except Killed:
                    record.status, record.error, record.error_kind = "error", Killed.message, "killed"
                except BaseException:
                    record.status, record.error, record.error_kind = "error", "the call was cancelled", "cancelled"
                    raise
                finally:
                    record.requests = call.sent or None
        finally:
            # Written after the snapshot (taken as the workspace context closes), also when the
            # call was cancelled; not when it never got recorded as started.
            if started:
                record.duration_ms = round((time.perf_counter() - began) * 1000, 3)
                with anyio.CancelScope(shield=True):
                    await self._finish(target, record, workspace, inserted=durable)
        return record

    async def record_refused(self, record: ToolCallRow) -> None:
        """Keep a call that never ran (denied by the user, unknown tool, bad arguments) in the
        history like any other, so the chat shows it and the model's context can be rebuilt."""
        record.status = "error"
        await self.repo.finish(record, inserted=False)

    @asynccontextmanager
    async def _workspace(self, chat_id: str | None, record: ToolCallRow, scratch: bool) -> AsyncIterator[Path | None]:
        if chat_id is None:
            if not scratch:  # built-ins need a chat, MCP servers never see our folders
                yield None
                return
            # Python tools get a cwd even outside a chat; whatever they leave there is dropped.
            folder = await anyio.to_thread.run_sync(self._make_scratch, record.toolset_id or "_")
            try:
                yield folder
            finally:
                await anyio.to_thread.run_sync(shutil.rmtree, folder, True)
            return
        async with self.workspace.locked(chat_id) as (ws, chat):
            if not ws.in_sync:
                await self.workspace.capture(ws, chat)  # outside edits become a version of their own
            record.pre_manifest_id = ws.active_manifest_id
            try:
                yield ws.tree.root
            finally:
                manifest = None  # (stays so only if the capture raised, and then this is unwinding)
                with anyio.CancelScope(shield=True):
                    manifest = await self.workspace.capture(ws, chat, "tool_run", record.id)
                record.post_manifest_id = manifest.id if manifest else ws.active_manifest_id

    def _make_scratch(self, toolset_id: str) -> Path:
        # One root per toolset, each call a folder of its own in it: the root is what a worker's
        # sandbox binds, so one warm worker serves every call of the toolset made outside a chat.
        root = self.scratch / toolset_id
        root.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix="call-", dir=root))

    async def _run(self, target: Resolved, call: _Call, on_progress: OnProgress | None, raw: bool) -> Any:
        tool = target.tool
        args, workspace, chat_id, call_id = call.args, call.workspace, call.chat_id, call.call_id
        timeout = target.config.get("timeout") or self.workers.limits.default_timeout
        confinement = target.confinement or DEFAULT_CONFINEMENT
        if tool.provider == "builtin":
            try:
                assert workspace is not None  # built-ins need a chat (checked above)
                return await BUILTINS[tool.id].run(BuiltinCall(workspace, args, timeout, confinement,
                                                                sandbox=self.workers.sandbox))
            except BuiltinError as exc:
                raise _Failed(exc.message, exc.kind, exc.result) from None
        if tool.provider == "python":
            assert tool.toolset_id is not None and target.toolset_dir is not None
            pool = self.workers.pool(tool.toolset_id, Path(target.toolset_dir))
            # Settings (secret values included) travel in the call's payload only: never in the
            # worker's environment or command line, which other processes can read.
            context = {"workspace": str(workspace), "chatId": chat_id, "toolsetId": tool.toolset_id,
                       "toolsetDir": target.toolset_dir, "toolCallId": call_id,
                       "settings": call.settings or {}, "telemetry": telemetry(call.client_context)}
            hidden = call.secret_values(target)
            try:
                # Seed 004's 9 s unless a layer (manifest or user, tools/limits.py) says otherwise.
                result = await pool.call(tool.id, target.entrypoint or "", args, context=context,
                                         input_schema=tool.input_schema, timeout=confinement.timeout_seconds,
                                         raw=raw, confinement=confinement,
                                         root=str(workspace.parent) if chat_id is None and workspace else None)
            except ToolFailure as exc:
                message = f"{exc.path}: {exc.message}" if exc.path else exc.message
                # A tool's error often quotes what it was given (an HTTP library's "Illegal header
                # value b'Bearer sk-...'"): a secret from its settings is masked in it.
                raise _Failed(secrets.scrub(message, hidden), exc.kind) from None
            return secrets.scrub_json(result, hidden)
        if tool.provider == "mcp":
            try:
                result = await self.catalog.host.call_tool(
                    target.config["server_key"], target.config["tool_name"], args,
                    on_progress=on_progress, origin=CallOrigin(chat_id, call_id))
            except McpError as exc:
                raise _Failed(exc.message, exc.kind) from None
            if result.get("isError"):
                text = " ".join(c.get("text", "") for c in result.get("content", []) if c.get("type") == "text")
                raise _Failed(text.strip() or "the MCP server reported an error", "server", result)
            return result
        if tool.provider == "http":
            secret_keys = frozenset(target.settings.secrets) if target.settings is not None else frozenset()
            try:
                return await self.http.run(HttpCall(tool.id, target.config, tool.input_schema, args,
                                                    call.settings or {}, secret_keys, timeout, call.sent))
            except HttpFailure as exc:
                raise _Failed(exc.message, exc.kind, exc.result) from None
        raise _Failed(f"tools of provider {tool.provider!r} cannot be run here", "load")

    async def _finish(self, target: Resolved, record: ToolCallRow, workspace: Path | None, *,
                      inserted: bool) -> None:
        output = tool_output.of_config(target.config)
        card = None
        if output.shows_card and record.status == "success":
            # The sanitiser takes about 1 ms per 100 KB of ordinary HTML: a big card goes to a thread.
            big = len((cards.fields(record.result) or {}).get("html") or "") > BIG_CARD
            card = (await anyio.to_thread.run_sync(cards.plan, output, record.args, record.result) if big
                    else cards.plan(output, record.args, record.result))
        record.render_plan = card or self._plan(target, record, workspace)
        # Outside a chat, nothing waits on the record: it is written after the reply.
        await self.repo.finish(record, inserted=inserted, later=record.chat_id is None)

    def _plan(self, target: Resolved, record: ToolCallRow, workspace: Path | None) -> dict[str, Any] | None:
        tool = target.tool
        if tool.renderer is None and tool.provider == "mcp" and record.status == "success":
            return mcp_plans.default_plan(record.result)  # by content, unless an override set a renderer
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
        current = await self.catalog.files_dir(record.tool_id)
        if current is None:
            raise StorageError(f"the artifact of tool call {call_id} is gone: its toolset was uninstalled")
        try:
            return await anyio.to_thread.run_sync(_page, plan, current)
        except RenderError as exc:
            raise StorageError(str(exc)) from None


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


_NULL = msgspec.Raw(b"null")


class _Call(msgspec.Struct):
    """One call's inputs beyond the tool itself."""

    args: dict[str, Any]
    workspace: Path | None
    chat_id: str | None
    call_id: str
    settings: dict[str, Any] | None
    client_context: ClientContext | None
    sent: list[dict[str, Any]] = []  # an HTTP tool's requests, as its record shows them

    def secret_values(self, target: Resolved) -> list[str]:
        keys = target.settings.secrets if target.settings is not None else {}
        return [v for k, v in (self.settings or {}).items() if k in keys and isinstance(v, str)]


async def _settle(result: msgspec.Raw, *, needed: bool) -> Any:
    """The result as it is kept on the record: built when something here reads it, None for
    ``null`` (a record leaves out a None result, never so a ``Raw`` one), else the JSON as it is."""
    if needed:
        return await decode_result(result)
    return None if result == _NULL else result


class _Failed(Exception):
    def __init__(self, message: str, kind: str, result: Any = None) -> None:
        super().__init__(message)
        self.message, self.kind, self.result = message, kind, result

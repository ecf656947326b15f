"""Composition root: argv/env -> claim stdio -> logging -> lock -> database -> serve.

Every way out (``shutdown`` + ``exit``, stdin EOF, SIGTERM/SIGINT, parent death) goes through
``Sidecar.run``'s one teardown: refuse new requests, cancel and answer in-flight work, close the
services, flush what is queued, exit; all bounded by ``settings.shutdown_timeout``.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from anyio.abc import TaskGroup

from . import process
from .api import SPECS
from .api.errors import ApiError, InstanceLocked, StorageError
from .rpc import Connection, MethodTable, RequestContext, StdioTransport, Transport
from .settings import Settings
from .chat.chats import ChatService
from .chat.providers.service import ProviderService
from .chat.turns import TurnService
from .store import Database
from .toolsets.calls import ToolCallService
from .toolsets.service import ToolsetService
from .mcp_host.host import McpHost
from .runtime.workers import WorkerHost
from .workspace.service import WorkspaceService

log = logging.getLogger("sidecar")


class Sidecar:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.started_at = time.monotonic()
        self.db: Database | None = None
        self.workspace: WorkspaceService = None  # type: ignore[assignment]  # set in serve()
        self.chats: ChatService = None  # type: ignore[assignment]
        self.providers: ProviderService = None  # type: ignore[assignment]
        self.turns: TurnService = None  # type: ignore[assignment]
        self.toolsets: ToolsetService = None  # type: ignore[assignment]
        self.tool_calls: ToolCallService = None  # type: ignore[assignment]
        self.mcp: McpHost = None  # type: ignore[assignment]
        self.connection: Connection | None = None
        self.exit_code = process.EXIT_OK
        self.shutdown_requested = False
        self.shutdown_done = False
        self._stop = anyio.Event()
        self._stop_reason = ""
        self._tg: TaskGroup | None = None
        self._closers: list[tuple[str, Callable[[], Awaitable[None]]]] = []
        self._shutdown_lock = anyio.Lock()
        # Called once when stopping begins; main() uses it to arm the hard exit deadline.
        self.on_stopping: Callable[[], None] | None = None

    # -- wiring ------------------------------------------------------------------------------

    def on_close(self, name: str, closer: Callable[[], Awaitable[None]]) -> None:
        """Register a service's teardown; they run in reverse order of registration."""
        self._closers.append((name, closer))

    def server_requests(self) -> list[str]:
        return [s.name for s in SPECS if s.direction == "serverToClient" and s.kind == "request"]

    async def _workspace_changed(
        self, chat_id: str, manifest_id: str, changes: tuple[list[str], list[str], list[str]]
    ) -> None:
        from .api.workspace import Changes, ChangedParams

        if self.connection is not None:
            added, removed, modified = changes
            await self.connection.notify(
                "workspace/changed", ChangedParams(chat_id, manifest_id, Changes(added, removed, modified))
            )

    # -- MCP servers ---------------------------------------------------------------------------

    async def sync_mcp(self, _changed: str | None = None) -> None:
        """Hand the host the servers the database says should exist (after any change to them)."""
        from .toolsets import mcp_servers

        rows = await mcp_servers.all_servers(self.db)  # type: ignore[arg-type]
        await self.mcp.sync([mcp_servers.config_of(r) for r in rows])

    async def _mcp_status(self, state: Any) -> None:
        from .api.mcp import ServerStatusParams
        from .api.errors import NotFound
        from .handlers.mcp import server_out
        from .toolsets import mcp_servers

        if self.connection is None:
            return
        try:
            row = await mcp_servers.find(self.db, state.key)  # type: ignore[arg-type]
        except NotFound:
            return  # removed meanwhile
        await self.connection.notify("mcpServers/status", ServerStatusParams(server_out(row, self)))

    async def _mcp_tools_changed(self, key: str) -> None:
        await self._mcp_status(self.mcp.state(key))

    async def _mcp_elicit(self, key: str, params: dict[str, Any]) -> dict[str, Any]:
        from .api.mcp import ElicitParams, ElicitResult

        if self.connection is None:
            return {"action": "cancel"}
        asked = ElicitParams(key, str(params.get("message", "")), params.get("requestedSchema") or {})
        answer = await self.connection.request("ui/elicit", asked, ElicitResult)
        return {"action": answer.action} | ({"content": answer.content} if answer.content is not None else {})

    def _follow_local_toolsets(self, tg: TaskGroup) -> None:
        from .toolsets.authoring import LocalToolsets

        local = LocalToolsets(self.toolsets, self._toolset_reloaded)
        self.toolsets.on_change.append(local.refresh)
        self.on_close("local toolset watcher", _async(local.close))
        tg.start_soon(local.bind, tg)

    async def _toolset_reloaded(self, toolset_id: str, error: tuple[str, str] | None) -> None:
        from .api.toolsets import ToolsetChangedParams
        from .handlers.toolsets import toolset_out

        if self.connection is None:
            return
        if error is None:
            params = ToolsetChangedParams(toolset_id, "reloaded", toolset_out(await self.toolsets.get(toolset_id)))
        else:
            path, reason = error
            params = ToolsetChangedParams(toolset_id, "reloadFailed", error=f"{path}: {reason}" if path else reason,
                                          error_path=path or None)
        await self.connection.notify("toolsets/changed", params)

    def watch_parent(self, pid: int) -> None:
        if self._tg is not None:
            self._tg.start_soon(self._watch_parent, pid)

    async def _watch_parent(self, pid: int) -> None:
        await process.watch_parent(pid, self.settings.parent_poll_interval)
        self.request_stop(f"parent process {pid} exited", process.EXIT_OK)

    # -- stopping ----------------------------------------------------------------------------

    def request_stop(self, reason: str, code: int) -> None:
        if not self._stop.is_set():
            self._stop_reason = reason
            self.exit_code = code
            self._stop.set()

    async def shutdown(self, exclude: Any = None) -> None:
        """Refuse new requests, cancel and answer the running ones, close every service.
        Idempotent: the ``shutdown`` request and the final teardown share it."""
        self.shutdown_requested = True
        async with self._shutdown_lock:
            if self.shutdown_done:
                return
            conn = self.connection
            if conn is not None:
                conn.refuse_requests()
                left = await conn.cancel_inflight(
                    "the server is shutting down", self.settings.shutdown_timeout / 2, exclude
                )
                if left:
                    log.warning("%d requests did not finish before the shutdown deadline", left)
            for name, closer in reversed(self._closers):
                try:
                    with anyio.CancelScope(shield=True):
                        await closer()
                except Exception:
                    log.exception("closing %s failed", name)
            self._closers.clear()
            self.shutdown_done = True

    async def _watch_signals(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        if sys.platform == "win32":
            task_status.started()
            return
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
            task_status.started()
            async for signum in signals:
                self.request_stop(f"signal {signal.Signals(signum).name}", process.EXIT_OK)
                return

    # -- running -----------------------------------------------------------------------------

    async def run(self, transport: Transport, methods: MethodTable) -> int:
        conn = Connection(
            transport,
            methods,
            max_line_bytes=self.settings.max_line_bytes,
            on_eof=lambda: self.request_stop("stdin closed", process.EXIT_OK),
        )
        self.connection = conn
        async with anyio.create_task_group() as tg:
            self._tg = tg
            await tg.start(self._watch_signals)  # before the first answer: a signal after it stops us cleanly
            await tg.start(conn.serve)
            if self.workspace is not None:
                self.workspace.bind(tg, self._workspace_changed)
            if self.toolsets is not None:
                self._follow_local_toolsets(tg)
            if self.tool_calls is not None:
                self.tool_calls.bind(tg)
            if self.mcp is not None:
                self.mcp.bind(tg)
                tg.start_soon(self.sync_mcp)
            if self.settings.parent_pid:
                self.watch_parent(self.settings.parent_pid)
            await self._stop.wait()
            log.info("stopping: %s", self._stop_reason)
            if self.on_stopping is not None:
                self.on_stopping()
            with anyio.move_on_after(self.settings.shutdown_timeout, shield=True) as deadline:
                await self.shutdown()
                await conn.wait_idle()  # the answer to a ``shutdown`` request may still be on its way
                await conn.flush(self.settings.shutdown_timeout)
            if deadline.cancelled_caught:
                log.error("shutdown took longer than %.1fs; exiting anyway",
                          self.settings.shutdown_timeout)
            conn.close()
            tg.cancel_scope.cancel()
        return self.exit_code


def _async(fn: Callable[[], None]) -> Callable[[], Awaitable[None]]:
    async def run() -> None:
        fn()

    return run


def _refusing_table(error: ApiError, code: int, app: Sidecar) -> MethodTable:
    """A sidecar that cannot serve still answers ``initialize`` with why, then exits."""

    async def initialize(params: Any, ctx: RequestContext) -> None:
        ctx.after_answer(lambda: app.request_stop(error.message, code))
        raise error

    table = MethodTable()
    table.add("initialize", initialize, inline=True)
    return table


async def serve(
    settings: Settings, transport: Transport, on_stopping: Callable[[], None] | None = None
) -> int:
    from .handlers import build_method_table

    app = Sidecar(settings)
    app.on_stopping = on_stopping
    lock = process.InstanceLock(settings.lock_path)
    try:
        lock.acquire()
    except process.InstanceLocked as exc:
        log.error("another sidecar (pid %s) holds %s", exc.holder_pid, exc.path)
        failure = InstanceLocked(str(exc.path), exc.holder_pid)
        app.exit_code = process.EXIT_LOCKED
        return await app.run(transport, _refusing_table(failure, process.EXIT_LOCKED, app))
    except OSError as exc:
        failure = StorageError(f"cannot create the data directory lock {settings.lock_path}: {exc}")
        app.exit_code = process.EXIT_STORAGE
        return await app.run(transport, _refusing_table(failure, process.EXIT_STORAGE, app))
    try:
        try:
            app.db = await Database.open(settings.db_path)
        except StorageError as exc:
            log.error("%s", exc.message)
            app.exit_code = process.EXIT_STORAGE
            return await app.run(transport, _refusing_table(exc, process.EXIT_STORAGE, app))
        app.on_close("database", app.db.close)
        app.workspace = WorkspaceService(app.db, settings.data_dir)
        app.on_close("workspace watchers", app.workspace.aclose)
        app.chats = ChatService(app.workspace)
        app.providers = ProviderService(app.db)
        app.on_close("model providers", app.providers.aclose)
        await _recover(app.db)
        workers = WorkerHost()
        app.on_close("tool workers", workers.aclose)
        app.toolsets = ToolsetService(app.db, settings.data_dir, workers)
        app.tool_calls = ToolCallService(app.db, app.workspace, workers, settings.data_dir / "scratch")
        app.on_close("tool call records", app.tool_calls.aclose)
        app.mcp = McpHost(on_status=app._mcp_status, on_tools_changed=app._mcp_tools_changed,
                          elicit=app._mcp_elicit)
        app.on_close("MCP servers", app.mcp.aclose)
        app.tool_calls.mcp = app.mcp
        app.turns = TurnService(app.chats, app.tool_calls, app.providers)
        app.toolsets.on_change.append(app.sync_mcp)
        return await app.run(transport, build_method_table(app))
    finally:
        lock.release()


async def _recover(db: Database) -> None:
    """Bring the database in line with this build and with how the last run ended."""
    from .store.tool_calls import ToolCallRepo
    from .toolsets import registry

    from .store.chats import ChatRepo

    await registry.sync_builtins(db)
    failed = await ToolCallRepo(db).fail_unfinished()
    if failed:
        log.warning("%d tool calls were cut off when the sidecar last stopped", failed)
    cut = await ChatRepo(db).fail_streaming()
    if cut:
        log.warning("%d chat turns were cut off when the sidecar last stopped", cut)


def main(argv: list[str] | None = None) -> int:
    from . import logs, settings as settings_mod

    settings = settings_mod.parse(argv)
    wire_in, wire_out = process.claim_stdio()
    listener = logs.setup(settings.log_level)
    log.info("sidecar %s starting (pid %d, data dir %s)", _version(), os.getpid(), settings.data_dir)

    def arm_hard_deadline() -> None:
        # Cancellation reaches only code that awaits; a handler stuck in a shielded or blocking
        # call would hold the event loop open. Past the deadline (plus grace) we leave anyway.
        def hard_exit() -> None:
            log.error("shutdown is stuck past its deadline; exiting now")
            listener.stop()
            os._exit(process.EXIT_WITHOUT_SHUTDOWN)

        timer = threading.Timer(settings.shutdown_timeout + 2.0, hard_exit)
        timer.daemon = True
        timer.start()

    async def _amain() -> int:
        transport = StdioTransport(wire_in, wire_out, settings.max_line_bytes)
        transport.start()
        return await serve(settings, transport, arm_hard_deadline)

    try:
        code = anyio.run(_amain)
    except BaseException:
        log.exception("the sidecar crashed")
        code = process.EXIT_WITHOUT_SHUTDOWN
    log.info("exiting with code %d", code)
    listener.stop()
    sys.stderr.flush()
    # The stdin feeder thread may still sit in a blocking read; nothing is left to clean up.
    os._exit(code)


def _version() -> str:
    from . import __version__

    return __version__

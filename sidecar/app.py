"""The process lifecycle: argv/env -> claim stdio -> logging -> lock -> database -> serve.

``compose`` builds the services; this module only runs them. Every way out (``shutdown`` +
``exit``, stdin EOF, SIGTERM/SIGINT, parent death) goes through ``Sidecar.run``'s one teardown:
refuse new requests, cancel and answer in-flight work, close the services, flush what is queued,
exit; all bounded by ``settings.shutdown_timeout``.
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
import anyio.abc
import anyio.to_thread
from anyio.abc import TaskGroup

from . import process
from .errors import InstanceLocked, SidecarError, StorageError
from .handlers import Deferred
from .rpc import Connection, MethodTable, RequestContext, StdioTransport, Transport
from .sandbox.detect import RECORD_FILE, Detected, probe, probed, recall
from .sandbox.detect import detect as sandbox_detect
from .settings import Settings
from .store import Database
from .store.settings import tools_enabled as stored_tools_enabled

log = logging.getLogger("sidecar")

StartServices = Callable[[TaskGroup, Connection], Awaitable[None]]


class Sidecar:
    def __init__(self, settings: Settings, on_stopping: Callable[[], None] | None = None) -> None:
        self.settings = settings
        self.started_at = time.monotonic()
        self.connection: Connection | None = None
        self.tools_enabled = True  # the stored kill switch, which ``initialize`` reports
        self.exit_code = process.EXIT_OK
        self.shutdown_done = False
        self._stop = anyio.Event()
        self._stop_reason = ""
        self._tg: TaskGroup | None = None
        self._closers: list[tuple[str, Callable[[], Awaitable[None]]]] = []
        self._shutdown_lock = anyio.Lock()
        # Called once when stopping begins; main() uses it to arm the hard exit deadline.
        self._on_stopping = on_stopping
        self._start_services: StartServices | None = None
        self._starting: anyio.CancelScope | None = None  # the build of the services, once begun
        self.sandbox_record = settings.data_dir / RECORD_FILE
        self._sandbox_recalled: Detected | None = None  # the last start's finding, while it still applies
        self.sandbox_reported: Detected | None = None  # what ``initialize`` said

    def begin_sandbox_probe(self) -> None:
        """Find which sandbox confines tools (sidecar/sandbox/detect.py). With a record of the last
        start that still applies, ``initialize`` answers from it and the probe waits for the answer;
        without one, the probe (a bwrap run, about 20 ms) starts now, beside the rest of start-up."""
        self._sandbox_recalled = recall(self.settings.sandbox, self.sandbox_record)
        if self._sandbox_recalled is None:
            self._start_sandbox_probe()

    def _start_sandbox_probe(self) -> None:
        threading.Thread(target=sandbox_detect, args=(self.settings.sandbox, self.sandbox_record),
                         name="sandbox-probe", daemon=True).start()

    async def sandbox_status(self) -> Detected:
        """What ``initialize`` reports: the probe's finding, else the record's (unverified), else
        the probe's once it is done."""
        found = probed(self.settings.sandbox) or self._sandbox_recalled
        if found is None:
            found = await probe(self.settings.sandbox, self.sandbox_record)
        self.sandbox_reported = found
        return found

    def on_close(self, name: str, closer: Callable[[], Awaitable[None]]) -> None:
        """Register a teardown; they run in reverse order of registration."""
        self._closers.append((name, closer))

    def initialized(self) -> None:
        """The ``initialize`` answer is on its way: build the services now (once), so the first
        answer never waits for them."""
        if self._sandbox_recalled is not None:
            self._start_sandbox_probe()  # re-checks the record ``initialize`` answered from
            self._sandbox_recalled = None
        if self._start_services is None or self._starting is not None or self._tg is None:
            return
        self._starting = anyio.CancelScope()
        self._tg.start_soon(self._run_start, self._start_services, self._starting)

    async def _run_start(self, start: StartServices, scope: anyio.CancelScope) -> None:
        assert self._tg is not None and self.connection is not None
        with scope:
            await start(self._tg, self.connection)

    def watch_parent(self, pid: int) -> None:
        if pid == os.getpid():
            log.warning("ignored a parent pid that is the sidecar's own (%d)", pid)
            return
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
            if self._starting is not None:
                # Each service hands over its teardown as it is built: a build cut short here
                # leaves nothing the closers below do not know about.
                self._starting.cancel()
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

    async def run(self, transport: Transport, methods: MethodTable, start_services: StartServices | None = None) -> int:
        """Serve ``methods`` until told to stop; ``start_services`` runs once ``initialize`` is answered."""
        conn = Connection(
            transport,
            methods,
            max_line_bytes=self.settings.max_line_bytes,
            on_eof=lambda: self.request_stop("stdin closed", process.EXIT_OK),
        )
        self.connection = conn
        self._start_services = start_services
        async with anyio.create_task_group() as tg:
            self._tg = tg
            await tg.start(self._watch_signals)  # before the first answer: a signal after it stops us cleanly
            await tg.start(conn.serve)
            if self.settings.parent_pid:
                self.watch_parent(self.settings.parent_pid)
            await self._stop.wait()
            log.info("stopping: %s", self._stop_reason)
            if self._on_stopping is not None:
                self._on_stopping()
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


def _refusing_table(error: SidecarError, code: int, app: Sidecar) -> MethodTable:
    """A sidecar that cannot serve still answers ``initialize`` with why, then exits."""

    async def initialize(params: Any, ctx: RequestContext) -> None:
        ctx.after_answer(lambda: app.request_stop(error.message, code))
        raise error

    table = MethodTable()
    table.add("initialize", initialize, inline=True)
    return table


async def _refuse(app: Sidecar, transport: Transport, error: SidecarError, code: int) -> int:
    app.exit_code = code
    return await app.run(transport, _refusing_table(error, code, app))


async def serve(
    settings: Settings, transport: Transport, on_stopping: Callable[[], None] | None = None
) -> int:
    app = Sidecar(settings, on_stopping)
    app.begin_sandbox_probe()
    lock = process.InstanceLock(settings.lock_path)
    try:
        lock.acquire()
    except InstanceLocked as exc:
        log.error("another sidecar (pid %s) holds %s", exc.holder_pid, exc.lock_path)
        return await _refuse(app, transport, exc, process.EXIT_LOCKED)
    except OSError as exc:
        failure = StorageError(f"cannot create the data directory lock {settings.lock_path}: {exc}")
        return await _refuse(app, transport, failure, process.EXIT_STORAGE)
    try:
        try:
            db = await Database.open(settings.db_path)
        except StorageError as exc:
            log.error("%s", exc.message)
            return await _refuse(app, transport, exc, process.EXIT_STORAGE)
        app.on_close("database", db.close)
        try:
            app.tools_enabled = await stored_tools_enabled(db)
        except StorageError as exc:
            log.error("%s", exc.message)
            return await _refuse(app, transport, exc, process.EXIT_STORAGE)  # (its teardown closes the database)
        deferred = Deferred(app)

        async def start_services(tg: TaskGroup, conn: Connection) -> None:
            # The service modules are imported here, after the ``initialize`` answer, to keep the
            # first answer within its start-up budget (they cost more than anyio + msgspec + aiosqlite),
            # and in a worker thread, so the event loop answers pings meanwhile (about a second of
            # imports on these machines; the GIL passes between the two every few milliseconds).
            try:
                # Abandoned if the sidecar stops meanwhile: the thread only imports; nothing waits for it.
                await anyio.to_thread.run_sync(_import_services, abandon_on_cancel=True)
                from . import compose
                from .handlers.notify import Notifier

                notifier = Notifier(conn)
                services = await compose.build(settings, db, notifier, tg, app.on_close, app.started_at,
                                               sandbox_reported=app.sandbox_reported)
                deferred.bind(compose.service_routes(services))
                process.freeze_heap()
            except SidecarError as exc:
                log.error("the services could not be started: %s", exc.message)
                deferred.fail(exc)
                app.request_stop("the services could not be started", process.EXIT_STORAGE
                                 if isinstance(exc, StorageError) else process.EXIT_WITHOUT_SHUTDOWN)
            except Exception as exc:
                log.exception("the services could not be started")
                deferred.fail(SidecarError(f"the sidecar could not start its services: {exc}"))
                app.request_stop("the services could not be started", process.EXIT_WITHOUT_SHUTDOWN)

        return await app.run(transport, deferred.table, start_services)
    finally:
        lock.release()


def _import_services() -> None:
    from . import compose  # noqa: F401
    from .handlers import notify  # noqa: F401


def main(argv: list[str] | None = None) -> int:
    from . import logs
    from . import settings as settings_mod

    settings = settings_mod.parse(argv)
    wire_in, wire_out = process.claim_stdio()
    process.own_process()
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

"""Worker processes for Python toolset tools: the host side of ``worker_main.py``.

Tools never run in the sidecar's event loop. Each toolset gets a pool of worker processes, started
lazily, kept warm between calls and stopped after ``Limits.idle_seconds`` without work (the worker
exits by itself; the pool then starts a fresh one). Every worker is the leader of its own process
group, so stopping it also stops whatever its tools started.

    host = WorkerHost(Limits())
    pool = host.pool("app-builder", Path("/data/toolsets/app-builder"))
    tools = await pool.describe({"write_file": "tools.files:write_file"})
    #   -> {"write_file": {"ok": {name, description, inputSchema, requiresConfirmation,
    #                             timeout, legacy}} | {"error": "tools/files.py: ..."}}
    value = await pool.call("write_file", "tools.files:write_file", {"path": "a", "content": "b"},
                            context={"workspace": "/abs/ws", "chatId": "c1", "toolCallId": "t1"},
                            input_schema=None, timeout=30)
    await host.restart("app-builder")   # the toolset's files changed
    await host.discard("app-builder")   # uninstalled
    await host.aclose()                 # sidecar shutdown

A failed call raises ``ToolFailure``; its ``kind`` is one of ``arguments``, ``raised``, ``timeout``,
``crashed``, ``memory``, ``output``, ``load`` and ``cancelled``. A timeout, a crash, a MemoryError or
a cancelled caller costs that call its worker (the process group is killed); the pool and every
other toolset keep serving. POSIX only: process groups, signals and rlimits.
"""

from __future__ import annotations

import itertools
import logging
import os
import re
import signal
import sys
import time
from collections import deque
from contextlib import suppress
from pathlib import Path
from typing import Any

import anyio
import msgspec

from ....children import KILL_WAIT, Child, dies_with_sidecar, exit_reason, scrubbed_env, spawn
from ....rpc.framing import Frame, LineSplitter, LineTooLong

log = logging.getLogger("sidecar.tools")

WORKER_SCRIPT = Path(__file__).with_name("worker_main.py")
SDK_DIR = Path(__file__).with_name("sdk")

_WORKER_KINDS = {"arguments", "raised", "memory", "load", "output", "cancelled"}

INTERRUPT_GRACE = 1.0  # seconds a stopped call gets to unwind after SIGINT
STOP_GRACE = 0.5  # seconds between closing stdin, SIGTERM and SIGKILL
EXIT_DRAIN = 0.2  # an answer written just before exiting may still be in the pipe
STDERR_LINES = 20
_REPLY_MARGIN = 1 << 20  # envelope, error message and traceback on top of the output limit
_DECODE_IN_THREAD = 1 << 20  # bytes: bigger answers are decoded off the event loop


class Limits(msgspec.Struct, frozen=True, kw_only=True):
    memory_bytes: int = 1 << 30  # RLIMIT_AS of each worker
    file_bytes: int = 1 << 30  # RLIMIT_FSIZE: the largest file a tool may write
    max_processes: int = 64  # processes a worker may add to what the user already runs
    output_bytes: int = 16 << 20  # the largest result, as JSON
    default_timeout: float = 60.0  # seconds, for calls that name none
    idle_seconds: float = 300.0  # an idle worker is stopped after this long
    max_workers: int = 2  # per toolset: concurrent calls beyond this wait for a free worker


DEFAULT_LIMITS = Limits()


class ToolFailure(Exception):
    """One call failed; the sidecar keeps serving."""

    def __init__(
        self,
        kind: str,
        message: str,
        *,
        path: str | None = None,
        traceback: str | None = None,
        stderr_tail: str | None = None,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message  # says what happened and what to do
        self.path = path  # for "arguments": where in the call, e.g. "args.config.items[2]"
        self.traceback = traceback
        self.stderr_tail = stderr_tail  # the worker's last stderr lines, for crashed/timeout


class _Error(msgspec.Struct):
    code: int
    message: str
    data: dict[str, Any] | None = None


class _Reply(msgspec.Struct):
    id: int | str | None = None
    result: Any = None
    error: _Error | None = None


class _CallAnswer(msgspec.Struct):
    result: msgspec.Raw


class _CallReply(msgspec.Struct):
    # The tool's value stays the worker's JSON (checked, not built): a caller that only stores
    # and forwards it never pays for building, and re-encoding, a big result.
    id: int | str | None = None
    result: _CallAnswer | None = None
    error: _Error | None = None


_REPLY = msgspec.json.Decoder(_Reply)
_CALL_REPLY = msgspec.json.Decoder(_CallReply)
_Decoder = msgspec.json.Decoder[_Reply] | msgspec.json.Decoder[_CallReply]
_ENCODER = msgspec.json.Encoder()


class ToolsetWorkers:
    """The worker pool of one toolset."""

    def __init__(
        self, toolset_id: str, toolset_dir: Path, limits: Limits = DEFAULT_LIMITS, env: dict[str, str] | None = None
    ) -> None:
        self.toolset_id = toolset_id
        self.toolset_dir = Path(toolset_dir).absolute()
        self.limits = limits
        self.env = dict(env or {})
        self._slots = anyio.Semaphore(limits.max_workers)
        self._idle: list[_Worker] = []  # most recently used last
        self._busy: set[_Worker] = set()
        self._generation = 0  # bumped when the code changes: older workers are not reused
        self._closed = False

    async def describe(self, tools: dict[str, str]) -> dict[str, dict[str, Any]]:
        """Load each tool's entrypoint and report its spec, or why it cannot be loaded."""
        try:
            return await self._request(
                "describe", {"tools": tools}, self.limits.default_timeout, f"loading toolset {self.toolset_id}"
            )
        except ToolFailure as exc:
            if exc.kind != "crashed":
                raise
            raise ToolFailure("load", exc.message, stderr_tail=exc.stderr_tail) from None

    async def call(
        self,
        tool_id: str,
        entrypoint: str,
        args: dict[str, Any],
        *,
        context: dict[str, Any],
        input_schema: dict[str, Any] | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - on expiry the worker is killed, which no cancel scope does
        raw: bool = False,
    ) -> Any:
        """Run one tool. ``context`` holds ``workspace`` (absolute) and optionally ``chatId`` and
        ``toolCallId``; ``input_schema`` is checked for legacy functions only (``@tool`` ones
        carry their own). ``raw``: return the value as the worker's JSON (``msgspec.Raw``, see
        ``decode_result``) instead of building it."""
        params = {
            "tool": tool_id,
            "entrypoint": entrypoint,
            "args": args,
            "inputSchema": input_schema,
            "context": context,
        }
        answer: _CallAnswer = await self._request(
            "call", params, timeout or self.limits.default_timeout, tool_id, _CALL_REPLY)
        return answer.result if raw else await decode_result(answer.result)

    async def restart(self) -> None:
        """Stop every idle worker; busy ones finish their call first. The next call starts a
        fresh worker, which imports the toolset's code anew."""
        self._generation += 1
        idle, self._idle = self._idle, []
        await _stop_all(idle)

    def retarget(self, toolset_dir: Path, env: dict[str, str] | None = None) -> None:
        """Serve the toolset from another folder (an upgrade). Synchronous, so the idle workers
        are killed here and their processes reaped when the pool next runs."""
        self.toolset_dir = Path(toolset_dir).absolute()
        self.env = dict(env or {})
        self._generation += 1
        for worker in self._idle:
            worker.kill()

    async def aclose(self) -> None:
        """Stop every worker, busy ones too (their calls fail with kind "cancelled")."""
        self._closed = True
        workers = [*self._idle, *self._busy]
        self._idle.clear()
        await _stop_all(workers)

    def stats(self) -> dict[str, Any]:
        live = [w for w in (*self._idle, *self._busy) if w.alive]
        return {"pids": [w.pid for w in live], "idle": len(self._idle), "busy": len(self._busy)}

    # -- internals -------------------------------------------------------------------------------

    async def _request(
        self, method: str, params: dict[str, Any], limit: float, what: str, decoder: _Decoder = _REPLY
    ) -> Any:
        async with self._slots:
            worker = await self._take()
            try:
                if self._closed:  # while the worker started
                    raise self._shut_down()
                return await worker.request(method, params, limit, what, decoder)
            finally:
                await self._release(worker)

    def _shut_down(self) -> ToolFailure:
        return ToolFailure("cancelled", f"the workers of toolset {self.toolset_id} were shut down")

    async def _take(self) -> _Worker:
        if self._closed:
            raise self._shut_down()
        # The worker quits by itself after idle_seconds: leave a margin so it never quits
        # while our request is on its way.
        fresh_for = self.limits.idle_seconds - min(2.0, self.limits.idle_seconds / 4)
        while self._idle:
            worker = self._idle.pop()
            if worker.generation == self._generation and worker.alive and worker.idle_for() < fresh_for:
                self._busy.add(worker)
                return worker
            await worker.stop()
        worker = await self._spawn()
        self._busy.add(worker)
        return worker

    async def _release(self, worker: _Worker) -> None:
        self._busy.discard(worker)
        if worker.reusable and worker.generation == self._generation and not self._closed:
            self._idle.append(worker)
        else:
            await worker.stop()

    async def _spawn(self) -> _Worker:
        config = _ENCODER.encode({
            "toolsetId": self.toolset_id,
            "toolsetDir": str(self.toolset_dir),
            "sdkDir": str(SDK_DIR),
            "memoryBytes": self.limits.memory_bytes,
            "fileBytes": self.limits.file_bytes,
            "maxProcesses": self.limits.max_processes,
            "outputBytes": self.limits.output_bytes,
            "idleSeconds": self.limits.idle_seconds,
            # Only where spawn cannot arm the parent-death signal: the worker then arms it itself.
            "parentPid": None if dies_with_sidecar() else os.getpid(),
        }).decode()
        try:
            child = await spawn(
                [sys.executable, "-I", str(WORKER_SCRIPT), config],
                env=worker_env(self.toolset_id, self.toolset_dir, self.env),
                cwd=self.toolset_dir,
                label=self.toolset_id,
                stderr_lines=STDERR_LINES,
                logger=log,
            )
        except OSError as exc:
            why = f"{exc.strerror}: {exc.filename}" if exc.strerror and exc.filename else str(exc)
            raise ToolFailure(
                "load", f"cannot start a worker for toolset {self.toolset_id} in {self.toolset_dir}: {why}"
            ) from None
        max_line = self.limits.output_bytes + _REPLY_MARGIN
        return _Worker(child, self.toolset_id, self._generation, max_line)


class WorkerHost:
    """Every toolset's pool, keyed by toolset id."""

    def __init__(self, limits: Limits = DEFAULT_LIMITS) -> None:
        self.limits = limits
        self._pools: dict[str, ToolsetWorkers] = {}

    def pool(self, toolset_id: str, toolset_dir: Path, env: dict[str, str] | None = None) -> ToolsetWorkers:
        """The toolset's pool, created on first use. A new folder or environment (an upgrade)
        retires the workers running the old code."""
        pool = self._pools.get(toolset_id)
        if pool is None:
            pool = self._pools[toolset_id] = ToolsetWorkers(toolset_id, toolset_dir, self.limits, env)
        elif pool.toolset_dir != Path(toolset_dir).absolute() or pool.env != (env or {}):
            pool.retarget(toolset_dir, env)
        return pool

    async def restart(self, toolset_id: str) -> None:
        pool = self._pools.get(toolset_id)
        if pool is not None:
            await pool.restart()

    async def discard(self, toolset_id: str) -> None:
        pool = self._pools.pop(toolset_id, None)
        if pool is not None:
            await pool.aclose()

    async def aclose(self) -> None:
        pools, self._pools = list(self._pools.values()), {}
        async with anyio.create_task_group() as tg:
            for pool in pools:
                tg.start_soon(pool.aclose)

    def stats(self) -> dict[str, Any]:
        pools = {toolset_id: pool.stats() for toolset_id, pool in self._pools.items()}
        return {"workers": sum(len(p["pids"]) for p in pools.values()), "pools": pools}


def worker_env(toolset_id: str, toolset_dir: Path, extra: dict[str, str]) -> dict[str, str]:
    """An allow-list, never the sidecar's own environment: it holds the model providers' keys."""
    return scrubbed_env({
        # glibc reserves 64 MiB of address space per thread arena, and RLIMIT_AS counts it.
        "MALLOC_ARENA_MAX": "2",
        "COVALT_TOOLSET_ID": toolset_id,
        "COVALT_TOOLSET_DIR": str(toolset_dir),
    } | extra)


class _Worker:
    """One worker process, serving one request at a time. Its answers are matched by id: a line
    a tool managed to write onto the pipe is skipped, never taken for the answer."""

    def __init__(self, child: Child, label: str, generation: int, max_line: int) -> None:
        self.child = child
        self.pid = child.pid
        self.generation = generation
        self.reusable = True
        self._label = label
        self._ids = itertools.count(1)
        self._max_line = max_line
        self._splitter = LineSplitter(max_line)
        self._frames: deque[Frame] = deque()
        self._idle_since = time.monotonic()

    @property
    def alive(self) -> bool:
        return self.child.alive

    def idle_for(self) -> float:
        return time.monotonic() - self._idle_since

    async def request(
        self, method: str, params: dict[str, Any], limit: float, what: str, decoder: _Decoder = _REPLY
    ) -> Any:
        request_id = next(self._ids)
        message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        line = _ENCODER.encode(message) + b"\n"
        reply: _Reply | _CallReply | LineTooLong | _TooDeep | None = None
        try:
            with anyio.move_on_after(limit) as deadline:
                reply = await self._exchange(line, request_id, decoder)
        except anyio.get_cancelled_exc_class():
            await self._interrupt()
            raise
        if deadline.cancelled_caught:
            await self._interrupt()
            raise ToolFailure(
                "timeout",
                f"{what} did not finish within {limit:g} s; the call was stopped and its worker restarted",
                stderr_tail=self.child.stderr_text() or None,
            )
        self._idle_since = time.monotonic()
        if reply is None:
            raise await self._ended(what)
        if isinstance(reply, LineTooLong):
            raise ToolFailure(
                "output", f"{what}: the worker's answer is {reply.size} bytes, over the limit of {self._max_line}"
            )
        if isinstance(reply, _TooDeep):
            raise ToolFailure("output", f"{what}: the worker's answer is nested too deeply to be read")
        if reply.error is not None:
            raise self._failure(reply.error, what)
        return reply.result

    def kill(self) -> None:
        self.reusable = False
        self.child.kill()

    async def stop(self) -> None:
        """Close stdin (the worker exits at EOF), then SIGTERM and SIGKILL its process group,
        each after a short wait. Idempotent; always runs to the end, even when cancelled."""
        self.reusable = False
        await self.child.stop(stdin_grace=STOP_GRACE, term_grace=STOP_GRACE)

    # -- one exchange ----------------------------------------------------------------------------

    async def _exchange(
        self, line: bytes, request_id: int, decoder: _Decoder
    ) -> _Reply | _CallReply | LineTooLong | _TooDeep | None:
        try:
            await self.child.stdin.send(line)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            pass  # the worker is gone: reading tells how it ended
        while True:
            frame = await self._next_frame()
            if frame is None or isinstance(frame, LineTooLong):
                return frame
            try:
                reply = await _decode(decoder, frame)
            except RecursionError:
                if _head_id(frame) == request_id:
                    return _TOO_DEEP
                reply = None
            if reply is not None and reply.id == request_id:
                return reply
            # Not ours: something a tool wrote onto the pipe, or an answer to a request given up on.
            log.warning("%s: skipped a line from the worker that is not the answer to request %d: %r",
                        self._label, request_id, frame[:200])

    async def _next_frame(self) -> Frame | None:
        """The next line the worker writes, or None once it has exited without one."""
        frame: Frame | None = None
        async with anyio.create_task_group() as tg:
            # Waiting for the exit too, not only for EOF: a child the tool forked holds the pipe.
            tg.start_soon(self._cancel_on_exit, tg.cancel_scope)
            frame = await self._read_frame()
            tg.cancel_scope.cancel()
        return frame

    async def _cancel_on_exit(self, scope: anyio.CancelScope) -> None:
        await self.child.process.wait()
        await anyio.sleep(EXIT_DRAIN)
        scope.cancel()

    async def _read_frame(self) -> Frame | None:
        while not self._frames:
            try:
                chunk = await self.child.stdout.receive(1 << 20)
            except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                self._frames.extend(self._splitter.finish())
                break
            self._frames.extend(self._splitter.feed(chunk))
        return self._frames.popleft() if self._frames else None

    async def _interrupt(self) -> None:
        """Stop the running call: SIGINT lets the tool unwind (its finally blocks run), and
        after a grace period the whole process group is killed."""
        self.reusable = False
        with anyio.CancelScope(shield=True):
            if self.alive:
                with suppress(ProcessLookupError):
                    os.kill(self.pid, signal.SIGINT)
                with anyio.move_on_after(INTERRUPT_GRACE):
                    await self._next_frame()  # the "cancelled" answer, or the exit
            self.child.kill()
            await self.child.wait_exit(KILL_WAIT)

    async def _ended(self, what: str) -> ToolFailure:
        """The failure for a worker that exited mid-call."""
        self.reusable = False
        with anyio.CancelScope(shield=True):
            await self.child.wait_exit(STOP_GRACE)
            self.child.kill()  # the tool's children, or a worker gone astray
            if self.child.stderr is not None:
                await self.child.stderr.settle(STOP_GRACE)
        if self.child.stopped:
            return ToolFailure("cancelled", f"{what} was stopped: the toolset's workers were shut down")
        tail = self.child.stderr_text()
        message = f"{what} crashed its worker, which {exit_reason(self.child.returncode)}; " \
                  "the next call starts a new worker"
        if tail:
            message += f"\nLast lines of its stderr:\n{tail}"
        return ToolFailure("crashed", message, stderr_tail=tail or None)

    def _failure(self, error: _Error, what: str) -> ToolFailure:
        data = error.data or {}
        kind = data.get("kind")
        if kind not in _WORKER_KINDS:
            # A protocol error: our bug, not the tool's. Do not trust this worker again.
            self.reusable = False
            return ToolFailure("crashed", f"{what}: the worker refused the request: {error.message}")
        if kind in ("memory", "cancelled"):
            self.reusable = False
        return ToolFailure(kind, error.message, path=data.get("path"), traceback=data.get("traceback"))


class _TooDeep:
    """An answer to our request, nested deeper than this process can decode."""


_TOO_DEEP = _TooDeep()
_HEAD_ID = re.compile(rb'\{"jsonrpc":"2\.0","id":(\d+),')


def _head_id(line: bytes) -> int | None:
    m = _HEAD_ID.match(line)
    return int(m[1]) if m else None


async def _decode(decoder: _Decoder, line: bytes) -> _Reply | _CallReply | None:
    """The reply on one line, or None when the line is not a JSON-RPC reply.

    Raises:
        RecursionError: the line nests deeper than the decoder can follow (a ``Raw`` value is
            checked to the same depth as a built one).
    """
    try:
        if len(line) > _DECODE_IN_THREAD:
            return await anyio.to_thread.run_sync(decoder.decode, line)
        return decoder.decode(line)
    except msgspec.DecodeError:
        return None


async def decode_result(raw: msgspec.Raw) -> Any:
    """The value of a result ``call(raw=True)`` returned (the worker's reply was already checked
    to be JSON, nested no deeper than a decoder follows)."""
    if len(raw) > _DECODE_IN_THREAD:
        # msgspec holds the GIL while it decodes, so the thread spares the loop only the queueing
        # around it; what it buys is that nothing else on the loop waits in line behind it.
        return await anyio.to_thread.run_sync(_decode_value, raw)
    return _decode_value(raw)


_decode_value = msgspec.json.Decoder().decode


async def _stop_all(workers: list[_Worker]) -> None:
    async with anyio.create_task_group() as tg:
        for worker in workers:
            tg.start_soon(worker.stop)

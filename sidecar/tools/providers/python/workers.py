"""Worker processes for Python toolset tools: the host side of ``worker_process/``.

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

import logging
import os
import sys
import weakref
from pathlib import Path
from typing import Any

import anyio
import msgspec

from ....children import dies_with_sidecar, scrubbed_env
from ....sandbox import cgroups
from ....sandbox.hints import hint
from ....sandbox.policy import DEFAULT, Confinement
from ....sandbox.runner import Sandbox, python_paths
from .worker import CALL_REPLY, ENCODER, REPLY, CallAnswer, Decoder, ToolFailure, Worker, decode_result, stop_all

log = logging.getLogger("sidecar.tools")

# A worker's sandbox is fixed when it starts: the chat's workspace it may write and its Confinement.
Scope = tuple[str | None, Confinement]

WORKER_PROGRAM = Path(__file__).with_name("worker_process")  # a folder: python runs its __main__
SDK_DIR = Path(__file__).with_name("sdk")


_REPLY_MARGIN = 1 << 20  # envelope, error message and traceback on top of the output limit


class Limits(msgspec.Struct, frozen=True, kw_only=True):
    memory_bytes: int = 1 << 30  # RLIMIT_AS of each worker
    file_bytes: int = 1 << 30  # RLIMIT_FSIZE: the largest file a tool may write
    max_processes: int = 64  # processes a worker may add to what the user already runs
    output_bytes: int = 16 << 20  # the largest result, as JSON
    default_timeout: float = 60.0  # seconds, for calls that name none
    idle_seconds: float = 300.0  # an idle worker is stopped after this long
    max_workers: int = 2  # per toolset: concurrent calls beyond this wait for a free worker


DEFAULT_LIMITS = Limits()


class ToolsetWorkers:
    """The worker pool of one toolset."""

    def __init__(
        self, toolset_id: str, toolset_dir: Path, limits: Limits = DEFAULT_LIMITS, env: dict[str, str] | None = None,
        sandbox: Sandbox | None = None,
    ) -> None:
        self.toolset_id = toolset_id
        self.sandbox = sandbox or Sandbox()
        self.toolset_dir = Path(toolset_dir).absolute()
        self.limits = limits
        self.env = dict(env or {})
        self._slots = anyio.Semaphore(limits.max_workers)
        self._idle: list[Worker] = []  # most recently used last
        self._busy: set[Worker] = set()
        self._scopes: weakref.WeakKeyDictionary[Worker, Scope] = weakref.WeakKeyDictionary()
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
        confinement: Confinement = DEFAULT,
        root: str | None = None,
    ) -> Any:
        """Run one tool. ``context`` holds ``workspace`` (absolute) and optionally ``chatId`` and
        ``toolCallId``; ``input_schema`` is checked for legacy functions only (``@tool`` ones
        carry their own). ``raw``: return the value as the worker's JSON (``msgspec.Raw``, see
        ``decode_result``) instead of building it. The worker is sandboxed to that workspace under
        ``confinement`` (its only writable place, besides ``confinement.writable``); ``root``:
        to a folder holding it instead (calls outside a chat: each its own folder in one root)."""
        params = {
            "tool": tool_id,
            "entrypoint": entrypoint,
            "args": args,
            "inputSchema": input_schema,
            "context": context,
            "limits": {"memoryBytes": confinement.memory_bytes, "maxProcesses": confinement.max_processes,
                       "diskBytes": confinement.disk_bytes},
        }
        try:
            answer: CallAnswer = await self._request(
                "call", params, timeout or self.limits.default_timeout, tool_id, CALL_REPLY,
                root or context.get("workspace"), confinement)
        except ToolFailure as exc:
            found = self.sandbox.detected()
            if exc.kind == "raised" and found.confined:
                said = hint(exc.message, confinement, context.get("workspace"), found.mechanism)
                if said:
                    exc.message = f"{exc.message}\n{said}"
                    exc.args = (exc.message,)
            raise
        return answer.result if raw else await decode_result(answer.result)

    async def restart(self) -> None:
        """Stop every idle worker; busy ones finish their call first. The next call starts a
        fresh worker, which imports the toolset's code anew."""
        self._generation += 1
        idle, self._idle = self._idle, []
        await stop_all(idle)

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
        await stop_all(workers)

    def stats(self) -> dict[str, Any]:
        live = [w for w in (*self._idle, *self._busy) if w.alive]
        return {"pids": [w.child.pid for w in live], "idle": len(self._idle), "busy": len(self._busy)}

    # -- internals -------------------------------------------------------------------------------

    async def _request(
        self, method: str, params: dict[str, Any], limit: float, what: str, decoder: Decoder = REPLY,
        workspace: str | None = None, confinement: Confinement = DEFAULT,
    ) -> Any:
        async with self._slots:
            worker = await self._take((workspace, confinement))
            try:
                if self._closed:  # while the worker started
                    raise self._shut_down()
                return await worker.request(method, params, limit, what, decoder)
            finally:
                await self._release(worker)

    def _shut_down(self) -> ToolFailure:
        return ToolFailure("cancelled", f"the workers of toolset {self.toolset_id} were shut down")

    async def _take(self, scope: Scope) -> Worker:
        if self._closed:
            raise self._shut_down()
        # The worker quits by itself after idle_seconds: leave a margin so it never quits
        # while our request is on its way.
        fresh_for = self.limits.idle_seconds - min(2.0, self.limits.idle_seconds / 4)
        usable = [w for w in self._idle
                  if w.generation == self._generation and w.alive and w.idle_for() < fresh_for]
        stale = [w for w in self._idle if w not in usable]
        # Each worker is sandboxed to one chat's workspace and confinement: it serves no other. The
        # other chats' idle workers stay warm, up to max_workers; beyond, the least recently used goes.
        match = next((w for w in reversed(usable) if self._scopes.get(w) == scope), None)
        if match is None:
            stale += usable[:max(0, len(usable) - self.limits.max_workers + 1)]
        self._idle = [w for w in usable if w not in stale and w is not match]
        if stale:  # (a task group per call otherwise: a warm call has none to stop)
            await stop_all(stale)
        if match is not None:
            self._busy.add(match)
            return match
        worker = await self._spawn(*scope)
        self._scopes[worker] = scope
        self._busy.add(worker)
        return worker

    async def _release(self, worker: Worker) -> None:
        self._busy.discard(worker)
        if worker.reusable and worker.generation == self._generation and not self._closed:
            self._idle.append(worker)
        else:
            await worker.stop()

    async def _spawn(self, workspace: str | None = None, confinement: Confinement = DEFAULT) -> Worker:
        group = cgroups.detect().create()
        jail_confinement = confinement
        if group is not None:
            # The pool gives this worker calls of this confinement only: its limits are written once,
            # here, and the sandbox lets the worker move its calls' processes in, nothing more.
            # One process more than the tool's: the next call's spare waits in the group while a
            # call runs (covalt_worker.limits.SPARE).
            group.set_limits(confinement.max_processes + 1, confinement.memory_bytes)
            jail_confinement = msgspec.structs.replace(
                confinement, writable=(*confinement.writable, *group.procs_files()))
        config = ENCODER.encode({
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
            "cgroup": group.config() if group is not None else None,
        }).decode()
        jail = await self.sandbox.prepare(
            [sys.executable, "-I", str(WORKER_PROGRAM), config],
            env=worker_env(self.toolset_id, self.toolset_dir, self.env), cwd=str(self.toolset_dir),
            workspace=workspace, read_only=[*python_paths(), str(WORKER_PROGRAM), str(SDK_DIR), str(self.toolset_dir),
                                            *(group.folders() if group is not None else ())],
            confinement=jail_confinement)
        try:
            child = await jail.spawn(label=self.toolset_id, logger=log)
        except OSError as exc:
            if group is not None:
                group.remove()
            why = f"{exc.strerror}: {exc.filename}" if exc.strerror and exc.filename else str(exc)
            raise ToolFailure(
                "load", f"cannot start a worker for toolset {self.toolset_id} in {self.toolset_dir}: {why}"
            ) from None
        max_line = self.limits.output_bytes + _REPLY_MARGIN
        return Worker(child, self._generation, max_line, group)


class WorkerHost:
    """Every toolset's pool, keyed by toolset id."""

    def __init__(self, limits: Limits = DEFAULT_LIMITS, sandbox: Sandbox | None = None) -> None:
        self.limits = limits
        self.sandbox = sandbox or Sandbox()
        self._pools: dict[str, ToolsetWorkers] = {}

    def pool(self, toolset_id: str, toolset_dir: Path, env: dict[str, str] | None = None) -> ToolsetWorkers:
        """The toolset's pool, created on first use. A new folder or environment (an upgrade)
        retires the workers running the old code."""
        pool = self._pools.get(toolset_id)
        if pool is None:
            pool = self._pools[toolset_id] = ToolsetWorkers(toolset_id, toolset_dir, self.limits, env, self.sandbox)
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


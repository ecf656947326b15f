"""A JSON-RPC client that spawns a sidecar and drives it over stdio, or runs it in-process.

The test harness, ``scripts/repl``, ``scripts/replay``, ``scripts/demo`` and the benchmarks all talk
to the real process through ``SidecarClient.spawn``. ``SidecarClient.in_process`` serves the same
app over an in-memory pipe in the caller's event loop, for unit-speed tests of chat turns, tool
calls and the catalog. It is not used by the server itself.
"""

from __future__ import annotations

import itertools
import json
import os
import sys
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc

from .ndjson import LineTooLong
from .rpc.transport import StdioTransport, Transport

ServerRequestHandler = Callable[[dict[str, Any]], Awaitable[Any] | Any]


class RemoteError(Exception):
    def __init__(self, error: dict[str, Any]) -> None:
        self.code: int = error.get("code", 0)
        self.message: str = error.get("message", "")
        self.data: Any = error.get("data")
        super().__init__(f"{self.code}: {self.message}")


class ProcessExited(Exception):
    pass


def sidecar_command(data_dir: str | os.PathLike[str], *extra: str) -> list[str]:
    return [sys.executable, "-m", "sidecar", "--data-dir", str(data_dir), *extra]


class _InProcess:
    """What ``SidecarClient`` needs of a process, for an app served in the caller's event loop."""

    def __init__(self) -> None:
        self.returncode: int | None = None
        self.exited = anyio.Event()

    async def wait(self) -> int:
        await self.exited.wait()
        assert self.returncode is not None
        return self.returncode

    def kill(self) -> None:
        pass

    async def aclose(self) -> None:
        pass


class Pipes:
    """A child whose stdin and stdout are pipes we hold the other ends of, as plain descriptors:
    read when readable and written directly (``StdioTransport`` does both for the sidecar's own
    ends), with no stream layers, flow control or thread between a line and its reader."""

    def __init__(self, proc: anyio.abc.Process, to_child: int, from_child: int) -> None:
        self.proc = proc
        self.to_child = to_child
        self.from_child = from_child
        self._open = [to_child, from_child]

    @classmethod
    async def open(cls, command: list[str], *, stderr: Any, env: dict[str, str] | None = None) -> Pipes:
        child_in, to_child = os.pipe()
        from_child, child_out = os.pipe()
        try:
            proc = await anyio.open_process(command, stdin=child_in, stdout=child_out, stderr=stderr, env=env)
        except BaseException:
            os.close(to_child)
            os.close(from_child)
            raise
        finally:
            os.close(child_in)
            os.close(child_out)
        return cls(proc, to_child, from_child)

    async def close_input(self) -> None:
        """The child reads end of input."""
        self._close(self.to_child)

    def close(self) -> None:
        """Our ends, once nothing reads or writes them any more."""
        for fd in list(self._open):
            self._close(fd)

    def _close(self, fd: int) -> None:
        if fd in self._open:
            self._open.remove(fd)
            anyio.notify_closing(fd)
            os.close(fd)


class _Waiter:
    """One request's answer, awaited by its sender: set by the read loop, or at end of input."""

    __slots__ = ("arrived", "response")

    def __init__(self) -> None:
        self.arrived = anyio.Event()
        self.response: dict[str, Any] | None = None


class SidecarClient:
    # Every deadline this client waits with is multiplied by this: the test suite sets it from
    # TEST_TIME_SCALE (tests/timing.py) for machines slower than the one the deadlines were set on.
    deadline_scale: float = 1.0

    def __init__(self, proc: Any, stderr_path: Path, transport: Transport,
                 close_input: Callable[[], Awaitable[None]]) -> None:
        self.proc = proc
        self.stderr_path = stderr_path
        self._transport = transport
        self._close_input = close_input
        self._stderr_snapshot: str | None = None  # the whole stderr, kept once the process is gone
        self.notifications: list[dict[str, Any]] = []
        self.server_requests: list[dict[str, Any]] = []  # unanswered ones, oldest first
        self.orphan_responses: list[dict[str, Any]] = []  # responses with id null or unknown ids
        self.garbage: list[bytes] = []  # stdout lines that were not JSON
        self.on_notification: Callable[[dict[str, Any]], None] | None = None
        self.on_server_request: Callable[[dict[str, Any]], None] | None = None
        self.on_message: Callable[[dict[str, Any]], None] | None = None  # sees everything, in order
        self._handlers: dict[str, ServerRequestHandler] = {}
        self._ids = itertools.count(1)
        self._waiting: dict[Any, _Waiter] = {}
        self._changed = anyio.Event()
        self._send_lock = anyio.Lock()
        self._eof = anyio.Event()
        self._tg: anyio.abc.TaskGroup | None = None

    # -- spawning ----------------------------------------------------------------------------

    @classmethod
    @asynccontextmanager
    async def spawn(
        cls,
        data_dir: str | os.PathLike[str] | None = None,
        *,
        args: tuple[str, ...] = (),
        command: list[str] | None = None,
        env: dict[str, str] | None = None,
        initialize: bool = True,
        client_name: str = "sidecar-client",
    ) -> AsyncIterator[SidecarClient]:
        """Start the sidecar (or ``command``), optionally initialize it, and on exit shut it down
        gracefully (killing it if it does not stop in time)."""
        with tempfile.TemporaryDirectory(prefix="sidecar-client-") as tmp:
            if command is None:
                command = sidecar_command(data_dir or Path(tmp) / "data", *args)
            stderr_path = Path(tmp) / "stderr.log"
            full_env = {**os.environ, **(env or {})}
            with open(stderr_path, "wb") as stderr:  # noqa: ASYNC230 (a new local temp file: no wait)
                pipes = await Pipes.open(command, stderr=stderr, env=full_env)
            proc = pipes.proc
            transport = StdioTransport(pipes.from_child, pipes.to_child, 1 << 30)
            client = cls(proc, stderr_path, transport, pipes.close_input)
            try:
                async with anyio.create_task_group() as tg:
                    client._tg = tg
                    tg.start_soon(client._read_loop)
                    if initialize:
                        await client.request(
                            "initialize", {"clientInfo": {"name": client_name, "version": "0"}}
                        )
                    yield client
                    await client.close()
                    tg.cancel_scope.cancel()
            except BaseExceptionGroup as group:
                if len(group.exceptions) == 1:  # the caller's own error, not a group of ours
                    raise group.exceptions[0] from None
                raise
            finally:
                with anyio.CancelScope(shield=True):
                    if proc.returncode is None:
                        proc.kill()
                    await proc.aclose()
                pipes.close()
                client._stderr_snapshot = stderr_path.read_text(errors="replace")

    @classmethod
    @asynccontextmanager
    async def in_process(cls, data_dir: str | os.PathLike[str], *, initialize: bool = True,
                         **settings: Any) -> AsyncIterator[SidecarClient]:
        """The app of ``python -m sidecar`` served over an in-memory pipe in this event loop
        (``settings``: fields of ``sidecar.settings.Settings``). Logs go to the caller's logging."""
        from .app import serve
        from .rpc import memory_pair
        from .settings import Settings

        config = Settings(data_dir=Path(data_dir), **settings)
        server_end, client_end = memory_pair(max_line_bytes=config.max_line_bytes)
        proc = _InProcess()
        client = cls(proc, Path(data_dir) / "in-process.log", client_end, client_end.aclose)

        async def run_app() -> None:
            try:
                proc.returncode = await serve(config, server_end)
            finally:
                proc.exited.set()
                await client_end.aclose()

        async with anyio.create_task_group() as tg:
            client._tg = tg
            tg.start_soon(run_app)
            tg.start_soon(client._read_loop)
            if initialize:
                await client.request("initialize", {"clientInfo": {"name": "in-process", "version": "0"}})
            yield client
            await client.close()
            tg.cancel_scope.cancel()

    # -- sending -----------------------------------------------------------------------------

    async def send_raw(self, line: bytes | str) -> None:
        """Write bytes as they are (a newline is added when missing)."""
        data = line.encode() if isinstance(line, str) else line
        if not data.endswith(b"\n"):
            data += b"\n"
        lock = self._send_lock
        if lock.locked():
            await lock.acquire()
        else:
            lock.acquire_nowait()  # no turn of the loop when nobody else is writing
        try:
            sent = self._transport.try_send(data)
            if sent < len(data):  # the rest goes before anyone else's line
                await self._transport.send(memoryview(data)[sent:])
        finally:
            lock.release()

    async def send(self, message: dict[str, Any]) -> None:
        await self.send_raw(json.dumps(message, separators=(",", ":")).encode())

    async def notify(self, method: str, params: Any = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        await self.send(message)

    def new_id(self) -> int:
        return next(self._ids)

    async def request_raw(
        self, method: str, params: Any = None, *, id: Any = None, timeout: float = 30
    ) -> dict[str, Any]:
        """Send a request and return the whole response envelope."""
        request_id = self.new_id() if id is None else id
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        wait = self.expect(request_id)
        await self.send(message)
        return await wait(timeout)

    async def request(self, method: str, params: Any = None, *, timeout: float = 30) -> Any:
        response = await self.request_raw(method, params, timeout=timeout)
        if "error" in response:
            raise RemoteError(response["error"])
        return response.get("result")

    def expect(self, request_id: Any) -> Callable[[float], Awaitable[dict[str, Any]]]:
        """Register interest in the response to ``request_id`` before sending it."""
        waiter = self._waiting[request_id] = _Waiter()
        if self._eof.is_set():
            waiter.arrived.set()

        async def wait(timeout: float = 30) -> dict[str, Any]:
            try:
                with anyio.fail_after(timeout * self.deadline_scale):
                    await waiter.arrived.wait()
            finally:
                self._waiting.pop(request_id, None)
            if waiter.response is None:
                raise ProcessExited(self._exit_text())
            return waiter.response

        return wait

    async def respond(self, request_id: Any, result: Any = None, error: dict | None = None) -> None:
        """Answer a server-to-client request."""
        self.server_requests = [r for r in self.server_requests if r.get("id") != request_id]
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id}
        if error is not None:
            message["error"] = error
        else:
            message["result"] = result
        await self.send(message)

    def handle(self, method: str, handler: ServerRequestHandler) -> None:
        """Answer every server request ``method`` with ``handler(params)``; raising
        ``RemoteError`` answers with that error."""
        self._handlers[method] = handler

    # -- waiting -----------------------------------------------------------------------------

    async def wait_for(self, predicate: Callable[[], Any], timeout: float = 10) -> Any:
        """Wait until ``predicate()`` is truthy; it is re-checked on every message and at least
        every 50 ms (for conditions outside the wire, such as the log)."""
        with anyio.fail_after(timeout * self.deadline_scale):
            while True:
                value = predicate()
                if value:
                    return value
                if self._eof.is_set():
                    raise ProcessExited(self._exit_text())
                if self._changed.is_set():  # already seen by predicate(): wait for the next message
                    self._changed = anyio.Event()
                with anyio.move_on_after(0.05):
                    await _first(self._changed.wait(), self._eof.wait())

    async def wait_notification(
        self, method: str, where: Callable[[Any], bool] | None = None, timeout: float = 10
    ) -> dict[str, Any]:
        def find() -> dict[str, Any] | None:
            for n in self.notifications:
                if n.get("method") == method and (where is None or where(n.get("params"))):
                    return n
            return None

        return await self.wait_for(find, timeout)

    async def next_orphan(self, timeout: float = 10) -> dict[str, Any]:
        """The next response that matched no request we are waiting for (e.g. id null)."""
        await self.wait_for(lambda: self.orphan_responses, timeout)
        return self.orphan_responses.pop(0)

    # -- stopping ----------------------------------------------------------------------------

    async def close(self, timeout: float = 10) -> int:
        """shutdown + exit, then wait for the exit code."""
        if self.proc.returncode is None and not self._eof.is_set():
            gone = (ProcessExited, anyio.BrokenResourceError, anyio.ClosedResourceError)
            try:
                await self.request("shutdown", timeout=timeout)
            except (RemoteError, *gone):
                pass  # e.g. refused before initialize: exit still stops it
            try:
                await self.notify("exit")
            except gone:
                pass
        return await self.wait_exit(timeout)

    async def wait_exit(self, timeout: float = 10) -> int:
        with anyio.fail_after(timeout * self.deadline_scale):
            return await self.proc.wait()

    async def close_stdin(self) -> None:
        await self._close_input()

    def stderr_text(self) -> str:
        if self._stderr_snapshot is not None:
            return self._stderr_snapshot
        return self.stderr_path.read_text(errors="replace") if self.stderr_path.exists() else ""

    def _exit_text(self) -> str:
        tail = "\n".join(self.stderr_text().splitlines()[-20:])
        return f"the sidecar exited (code {self.proc.returncode}); stderr ends with:\n{tail}"

    # -- reading -----------------------------------------------------------------------------

    async def _read_loop(self) -> None:
        try:
            while True:
                for line in await self._transport.receive():
                    if isinstance(line, LineTooLong):
                        continue  # (the cap is 1 GiB)
                    try:
                        message = json.loads(line)
                    except ValueError:
                        # Not ours to crash on (an attached command may print anything): keep it.
                        self.garbage.append(bytes(line))
                        self._changed.set()
                        continue
                    await self._on_message(message)
        except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass
        finally:
            self._eof.set()
            self._changed.set()
            for waiter in self._waiting.values():
                waiter.arrived.set()

    async def _on_message(self, message: dict[str, Any]) -> None:
        if self.on_message:
            self.on_message(message)
        if "method" in message and "id" in message:
            handler = self._handlers.get(message["method"])
            if handler is not None:
                assert self._tg is not None
                self._tg.start_soon(self._answer, handler, message)
            else:
                self.server_requests.append(message)
                if self.on_server_request:
                    self.on_server_request(message)
        elif "method" in message:
            self.notifications.append(message)
            if self.on_notification:
                self.on_notification(message)
        else:
            waiter = self._waiting.get(message.get("id"))
            if waiter is not None and waiter.response is None:
                waiter.response = message
                waiter.arrived.set()
            else:
                self.orphan_responses.append(message)
        self._changed.set()

    async def _answer(self, handler: ServerRequestHandler, message: dict[str, Any]) -> None:
        try:
            result = handler(message.get("params") or {})
            if isinstance(result, Awaitable):
                result = await result
        except RemoteError as exc:
            error = {"code": exc.code, "message": exc.message}
            if exc.data is not None:
                error["data"] = exc.data
            await self.respond(message["id"], error=error)
        else:
            await self.respond(message["id"], result)


async def _first(*waits: Awaitable[Any]) -> None:
    """Return as soon as any of ``waits`` completes."""
    async with anyio.create_task_group() as tg:

        async def run(w: Awaitable[Any]) -> None:
            await w
            tg.cancel_scope.cancel()

        for w in waits:
            tg.start_soon(run, w)

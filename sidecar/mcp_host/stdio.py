"""The stdio transport: an MCP server as a child process speaking NDJSON on its stdin/stdout.

Ours rather than the SDK's `stdio_client` because we need what that one keeps to itself: the child's
pid (to reap its whole process group however it ended), its stderr on a pipe we read (the SDK passes
stderr through to a file), non-JSON stdout lines as data (to say "this is not an MCP server"), and a
line cap (an oversized response fails its request instead of filling memory).

- The child runs in its own session/process group (`start_new_session`). Stopping: flush, close its
  stdin, wait `stop_grace`, SIGTERM the group, wait `kill_grace`, SIGKILL the group; the group is
  also swept when the leader exits first, so grandchildren don't outlive it. If the sidecar itself is
  killed, the child's stdin pipe loses its only writer and the child sees EOF.
- stderr is read continuously into a ring of the last `stderr_lines` lines (and the debug log), so a
  chatty child never blocks on a full pipe and never reaches the sidecar's own stdout.
- stdout is split on `\\n` by hand over bytes (no asyncio line limit, no quadratic re-joins for a
  10 MB line); a line over `max_line` bytes is skipped while streaming and its request (id found at
  either end of the line) is answered with `TOO_LARGE_CODE`.

Import this module lazily: it imports the SDK's types.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import subprocess
import sys
from collections import deque
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager, suppress

import anyio
import anyio.abc
import mcp_types as types
from mcp.shared.message import SessionMessage

log = logging.getLogger(__name__)

TOO_LARGE_CODE = -32650
"""Error code of the answer synthesized for a response over the line cap (`data.covaltTooLarge`)."""

_CHUNK = 1 << 20
_WRITER_FLUSH = 0.5
_POLL = 0.01
_ID_HEAD = re.compile(rb'"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")')
_KEY = re.compile(rb'"(result|error)"\s*:')


def _find_id(head: bytes, tail: bytes) -> int | str | None:
    """The JSON-RPC id of an oversized response from its first and last bytes."""
    m = _ID_HEAD.search(head)
    key = _KEY.search(head)
    if m is None or (key is not None and key.start() < m.start()):
        # `"id"` after `"result":` in the head is inside the result: the id is at the end.
        ms = list(_ID_HEAD.finditer(tail))
        m = ms[-1] if ms else None
    if m is None:
        return None
    raw = m.group(1)
    if raw.startswith(b'"'):
        import json

        try:
            return json.loads(raw)
        except ValueError:
            return None
    return int(raw)


def describe_returncode(code: int | None) -> str:
    if code is None:
        return "is still running"
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


class _StdinWriter:
    """The write stream a `ClientSession` takes, writing to the child's stdin in the sender's task
    (no hop through a writer task). A message is appended to the pipe's buffer whole, so
    concurrent senders never interleave; after the child is gone, sends are dropped and its
    stdout EOF tells the session."""

    def __init__(self, process: anyio.abc.Process) -> None:
        self._stdin = process.stdin
        self._closed = False

    async def send(self, message: SessionMessage, /) -> None:
        if self._closed:
            raise anyio.ClosedResourceError
        data = message.message.model_dump_json(by_alias=True, exclude_unset=True).encode("utf-8") + b"\n"
        assert self._stdin is not None
        try:
            await self._stdin.send(data)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            pass

    async def aclose(self) -> None:
        self._closed = True

    async def __aenter__(self) -> _StdinWriter:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class _StdoutReader:
    """The read stream a `ClientSession` takes: the child's stdout split into messages in the
    session's own reading task (no hop through a reader task and a memory stream)."""

    def __init__(self, transport: StdioTransport, stdout: anyio.abc.ByteReceiveStream) -> None:
        self._t = transport
        self._stdout = stdout
        self._ready: deque[SessionMessage] = deque()
        self._buf = bytearray()
        self._skipping = False
        self._head = self._tail = b""
        self._skipped = 0
        self._ended = False

    async def receive(self) -> SessionMessage:
        while not self._ready:
            if self._ended:
                raise anyio.EndOfStream
            try:
                chunk = await self._stdout.receive(_CHUNK)
            except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                if self._buf and not self._skipping:
                    self._put(self._t._parse(bytes(self._buf)))
                self._end()
                continue
            self._feed(chunk)
        return self._ready.popleft()

    def _put(self, item: SessionMessage | None) -> None:
        if item is not None:
            self._ready.append(item)

    def _feed(self, chunk: bytes) -> None:
        max_line = self._t.max_line
        pos = 0
        size = len(chunk)
        while pos < size:
            nl = chunk.find(b"\n", pos)
            end = size if nl < 0 else nl
            if self._skipping:
                self._skipped += end - pos
                self._tail = (self._tail + chunk[max(pos, end - 512):end])[-512:]
            elif nl >= 0 and not self._buf and end - pos <= max_line:
                # The common case: a whole line inside one chunk, no copy into the buffer.
                self._put(self._t._parse(chunk[pos:end]))
                pos = nl + 1
                continue
            else:
                self._buf += chunk[pos:end]
                if len(self._buf) > max_line:
                    self._skipping = True
                    self._head, self._tail, self._skipped = bytes(self._buf[:512]), bytes(self._buf[-512:]), len(self._buf)
                    self._buf = bytearray()
            if nl < 0:
                break
            if self._skipping:
                self._put(self._t._oversized(self._head, self._tail, self._skipped))
                self._skipping = False
            else:
                line = bytes(self._buf)
                self._buf = bytearray()
                self._put(self._t._parse(line))
            pos = nl + 1

    def _end(self) -> None:
        self._ended = True
        self._t.closed.set()

    async def aclose(self) -> None:
        self._end()
        self._ready.clear()

    def __aiter__(self) -> _StdoutReader:
        return self

    async def __anext__(self) -> SessionMessage:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> _StdoutReader:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class StdioTransport:
    def __init__(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: str | None = None,
        label: str = "",
        max_line: int = 32 << 20,
        stderr_lines: int = 40,
        stop_grace: float = 1.0,
        kill_grace: float = 1.0,
    ) -> None:
        self.argv = list(argv)
        self.env = dict(env)
        self.cwd = cwd
        self.label = label
        self.max_line = max_line
        self.stop_grace = stop_grace
        self.kill_grace = kill_grace
        self.pid: int | None = None
        self.stderr_tail: deque[str] = deque(maxlen=stderr_lines)
        self.garbage: list[str] = []
        """The first few stdout lines that were not JSON-RPC."""
        self.garbage_seen = anyio.Event()
        self.message_seen = False
        self.closed = anyio.Event()
        """Set when the child's stdout ends (it exited or closed it)."""
        self.stderr_done = anyio.Event()
        self._process: anyio.abc.Process | None = None

    @property
    def returncode(self) -> int | None:
        return None if self._process is None else self._process.returncode

    def stderr_text(self, lines: int = 20, max_chars: int = 4000) -> str:
        text = "\n".join(list(self.stderr_tail)[-lines:])
        return text[-max_chars:]

    async def wait_exited(self, timeout: float) -> int | None:
        """Wait (bounded) for the child to exit and its stderr to drain; its return code or None."""
        with anyio.move_on_after(timeout):
            while self.returncode is None:
                await anyio.sleep(_POLL)
            await self.stderr_done.wait()
        return self.returncode

    # -- lifecycle -------------------------------------------------------------------------------

    @asynccontextmanager
    async def open(self) -> AsyncIterator[tuple[_StdoutReader, _StdinWriter]]:
        """Spawn the child and yield the (read, write) stream pair a `ClientSession` takes.

        Raises:
            OSError: the child could not be started (bad cwd, not executable, ...).
        """
        process = await anyio.open_process(
            self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=self.env, cwd=self.cwd, start_new_session=True,
        )
        # No awaits until the task group is entered: a cancellation here would leak the child.
        self._process = process
        self.pid = process.pid
        log.debug("[%s] started pid %d", self.label, process.pid)
        assert process.stdout is not None
        read_r = _StdoutReader(self, process.stdout)
        write_w = _StdinWriter(process)
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._read_stderr)
            try:
                yield read_r, write_w
            finally:
                with anyio.CancelScope(shield=True):
                    await read_r.aclose()
                    await write_w.aclose()
                    await self._stop(process)
                tg.cancel_scope.cancel()

    async def _stop(self, process: anyio.abc.Process) -> None:
        if process.stdin is not None:
            # Bounded: closing waits for buffered bytes a child that never reads would never take.
            with anyio.move_on_after(_WRITER_FLUSH), \
                    suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                await process.stdin.aclose()
        if not await self._wait_leader(self.stop_grace):
            log.debug("[%s] pid %d did not exit on stdin EOF: SIGTERM to its group", self.label, process.pid)
            await self._terminate_group(process)
        elif self._group_alive(process.pid):
            # The leader is gone but something it started is still in its group.
            log.debug("[%s] sweeping what pid %d left in its process group", self.label, process.pid)
            await self._terminate_group(process)
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                    await stream.aclose()
        transport = getattr(getattr(process, "_process", None), "_transport", None)
        close = getattr(transport, "close", None)
        if callable(close):
            with suppress(Exception):
                close()
        log.debug("[%s] pid %d stopped (%s)", self.label, process.pid, describe_returncode(process.returncode))

    async def _wait_leader(self, timeout: float) -> bool:
        # Poll `returncode`, not `wait()`: on 3.11+ asyncio's wait() also waits for the pipes to
        # close, which a surviving grandchild holding them would turn into a hang.
        assert self._process is not None
        with anyio.move_on_after(timeout):
            while self._process.returncode is None:
                await anyio.sleep(_POLL)
        return self._process.returncode is not None

    @staticmethod
    def _group_alive(pgid: int) -> bool:
        if sys.platform == "win32":  # no process groups: the leader is all we can see
            return False
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    async def _terminate_group(self, process: anyio.abc.Process) -> None:
        pgid = process.pid  # start_new_session: the leader's pid is the group id
        if sys.platform == "win32":
            with suppress(ProcessLookupError, OSError):
                process.terminate()
            if not await self._wait_leader(self.kill_grace):
                with suppress(ProcessLookupError, OSError):
                    process.kill()
                await self._wait_leader(1.0)
            return
        try:
            os.killpg(pgid, signal.SIGTERM)
        except ProcessLookupError:
            return
        except PermissionError:
            log.warning("[%s] no permission to signal process group %d", self.label, pgid)
        with anyio.move_on_after(self.kill_grace):
            while True:
                _ = process.returncode  # lets the leader be reaped
                if process.returncode is not None and not self._group_alive(pgid):
                    return
                await anyio.sleep(_POLL)
        log.debug("[%s] SIGKILL to process group %d", self.label, pgid)
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
        await self._wait_leader(1.0)

    # -- pipes -------------------------------------------------------------------------------------

    def _parse(self, line: bytes) -> SessionMessage | None:
        line = line.rstrip(b"\r")
        if not line.strip():
            return None
        try:
            message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        except ValueError:
            text = line[:300].decode("utf-8", "replace")
            if len(self.garbage) < 5:
                self.garbage.append(text)
            if not self.garbage_seen.is_set() or len(self.garbage) < 5:
                log.warning("[%s] non-JSON-RPC line on stdout: %r", self.label, text)
            self.garbage_seen.set()
            return None
        self.message_seen = True
        return SessionMessage(message)

    def _oversized(self, head: bytes, tail: bytes, size: int) -> SessionMessage | None:
        request_id = _find_id(head, tail)
        log.warning("[%s] skipped a %d-byte message over the %d-byte limit (id %r)",
                    self.label, size, self.max_line, request_id)
        if request_id is None:
            return None
        error = types.ErrorData(
            code=TOO_LARGE_CODE,
            message=f"the response is {size} bytes, over the {self.max_line}-byte limit",
            data={"covaltTooLarge": True, "size": size},
        )
        return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error))

    async def _read_stderr(self) -> None:
        assert self._process is not None and self._process.stderr is not None
        stderr = self._process.stderr
        partial = b""
        try:
            while True:
                try:
                    chunk = await stderr.receive(65536)
                except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                    break
                lines = (partial + chunk).split(b"\n")
                partial = lines.pop()[-8192:]
                for line in lines:
                    self._stderr_line(line)
        finally:
            if partial:
                self._stderr_line(partial)
            self.stderr_done.set()

    def _stderr_line(self, raw: bytes) -> None:
        text = raw.rstrip(b"\r").decode("utf-8", "replace")
        if len(text) > 1000:
            text = text[:1000] + "…"
        self.stderr_tail.append(text)
        log.debug("[%s] stderr: %s", self.label, text)

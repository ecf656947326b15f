"""The stdio transport: an MCP server as a child process speaking NDJSON on its stdin/stdout.

Ours rather than the SDK's `stdio_client` because we need what that one keeps to itself: the child's
pid (to reap its whole process group however it ended), its stderr on a pipe we read (the SDK passes
stderr through to a file), non-JSON stdout lines as data (to say "this is not an MCP server"), and a
line cap (an oversized response fails its request instead of filling memory).

- The child is started, stopped and worded by `sidecar/children.py`: its own session/process group,
  the stop ladder (flush and close its stdin, wait `stop_grace`, SIGTERM the group, wait `kill_grace`,
  SIGKILL the group; the group is also swept when the leader exits first), and on Linux a
  parent-death signal; if the sidecar itself is killed elsewhere, the child's stdin pipe loses its
  only writer and the child sees EOF.
- stderr is read continuously into a ring of the last `stderr_lines` lines (and the debug log), so a
  chatty child never blocks on a full pipe and never reaches the sidecar's own stdout.
- stdout is split on `\\n` by hand over bytes (no asyncio line limit, no quadratic re-joins for a
  10 MB line); a line over `max_line` bytes is skipped while streaming and its request (id found at
  either end of the line) is answered with `TOO_LARGE_CODE`.

Cheap to import, so the child can be started while the SDK is still loading in a worker thread:
the SDK's types are needed only to read and answer messages, which the session does once it is loaded.
"""

from __future__ import annotations

import logging
import os
import re
import shlex
from collections import deque
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from types import TracebackType
from typing import TYPE_CHECKING, cast

import anyio
import anyio.abc

from ..api.debug import SandboxMechanism
from ..children import Child, StderrTail, spawn
from ..sandbox import cgroups, hints
from ..sandbox.policy import Confinement, format_size
from ..sandbox.runner import Sandbox, python_paths
from ..secrets import clean
from . import server_files

if TYPE_CHECKING:
    from mcp.shared.message import SessionMessage

__all__ = ["TOO_LARGE_CODE", "StdioTransport", "Streams"]

log = logging.getLogger(__name__)

TOO_LARGE_CODE = -32650
"""Error code of the answer synthesized for a response over the line cap (`data.covaltTooLarge`)."""

_CHUNK = 1 << 20
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


class _StdinWriter:
    """The write stream a `ClientSession` takes, writing to the child's stdin in the sender's task
    (no hop through a writer task). A message is appended to the pipe's buffer whole, so
    concurrent senders never interleave; after the child is gone, sends are dropped and its
    stdout EOF tells the session."""

    def __init__(self, stdin: anyio.abc.ByteSendStream) -> None:
        self._stdin = stdin
        self._closed = False

    async def send(self, message: SessionMessage, /) -> None:
        if self._closed:
            raise anyio.ClosedResourceError
        data = message.message.model_dump_json(by_alias=True, exclude_unset=True).encode("utf-8") + b"\n"
        try:
            await self._stdin.send(data)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            pass

    async def aclose(self) -> None:
        self._closed = True

    async def __aenter__(self) -> _StdinWriter:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc_val: BaseException | None,
                        exc_tb: TracebackType | None) -> None:
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
                    self._head, self._tail = bytes(self._buf[:512]), bytes(self._buf[-512:])
                    self._skipped = len(self._buf)
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

    async def __aexit__(self, exc_type: type[BaseException] | None, exc_val: BaseException | None,
                        exc_tb: TracebackType | None) -> None:
        await self.aclose()


Streams = tuple[_StdoutReader, _StdinWriter]
"""What a `ClientSession` reads from and writes to: the child's stdout and stdin."""


def _server_group(confinement: Confinement) -> cgroups.WorkerGroup | None:
    """A cgroup holding the server and all it starts, with its memory and process limits; None
    where no cgroup can be used (debug/info's sandbox.limits says rlimit): the server then runs
    without those two limits, its filesystem and network still confined."""
    group = cgroups.detect().create()
    if group is not None:
        group.set_limits(confinement.max_processes, confinement.memory_bytes)
    return group


def _entering(group: cgroups.WorkerGroup) -> list[str]:
    """A shell that moves itself into ``group`` and then execs the sandbox: everything the sandbox
    starts is in the group from its first instruction (moving the pid after the spawn would let it
    fork outside first). A write that fails stops the server there, with the shell's message on its
    stderr: it never runs without the limits it was given."""
    enter = " && ".join(f"echo $$ > {shlex.quote(path)}" for path in group.procs_files())
    return ["/bin/sh", "-c", f'{enter} && exec "$@"', "sh"]


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
        closed: anyio.Event | None = None,
        sandbox: Sandbox | None = None,
        confinement: Confinement | None = None,
    ) -> None:
        self.argv = list(argv)
        self.env = dict(env)
        self.cwd = cwd
        self.label = label
        self.max_line = max_line
        self.stop_grace = stop_grace
        self.kill_grace = kill_grace
        self.pid: int | None = None
        self.stderr_lines = stderr_lines
        self.garbage: list[str] = []
        """The first few stdout lines that were not JSON-RPC."""
        self.garbage_seen = anyio.Event()
        self.message_seen = False
        self.closed = closed if closed is not None else anyio.Event()
        """Set when the child's stdout ends (it exited or closed it); the caller's event when given."""
        self._child: Child | None = None
        self._sandbox = sandbox
        self._confinement = confinement
        self._group: cgroups.WorkerGroup | None = None
        self._oom_killed: bool | None = None
        self.readable: list[str] = []
        """What the sandbox shows the server besides the system (server_files.py); empty unconfined."""
        self.confined_by: SandboxMechanism | None = None
        """What confines the running child (bubblewrap, landlock, seatbelt, or none when no mechanism
        could); None: it was not asked to be confined."""

    @property
    def returncode(self) -> int | None:
        return None if self._child is None else self._child.returncode

    @property
    def stderr(self) -> StderrTail | None:
        """The reader of the child's stderr (None before it started)."""
        return None if self._child is None else self._child.stderr

    @property
    def stderr_tail(self) -> deque[str]:
        """The child's last stderr lines (empty before it started)."""
        if self._child is None or self._child.stderr is None:
            return deque()
        return self._child.stderr.lines

    def stderr_text(self, lines: int = 20, max_chars: int = 4000) -> str:
        return "" if self._child is None else self._child.stderr_text(lines, max_chars)

    async def wait_exited(self, within: float) -> int | None:
        """Wait up to ``within`` seconds for the child to exit and its stderr to drain; its return
        code or None."""
        child = self._child
        if child is None:
            return None
        with anyio.move_on_after(within):
            await child.wait_exit(within)
            if child.stderr is not None:
                await child.stderr.settle(within)
        return self.returncode

    # -- lifecycle -------------------------------------------------------------------------------

    @asynccontextmanager
    async def open(self) -> AsyncIterator[tuple[_StdoutReader, _StdinWriter]]:
        """Spawn the child and yield the (read, write) stream pair a `ClientSession` takes.

        Raises:
            OSError: the child could not be started (bad cwd, not executable, ...).
        """
        child = await self._spawn()
        # No awaits until the try: a cancellation here would leak the child.
        self._child = child
        self.pid = child.pid
        read_r = _StdoutReader(self, child.stdout)
        write_w = _StdinWriter(child.stdin)
        try:
            yield read_r, write_w
        finally:
            with anyio.CancelScope(shield=True):
                await read_r.aclose()
                await write_w.aclose()
                await child.stop(stdin_grace=self.stop_grace, term_grace=self.kill_grace, kill_wait=1.0)

    async def _spawn(self) -> Child:
        if self._sandbox is None or self._confinement is None:
            return await spawn(self.argv, env=self.env, cwd=self.cwd, label=f"[{self.label}]",
                               stderr_lines=self.stderr_lines, stderr_line_chars=1000, logger=log)
        # Opted in: the server reads its command, its script's project and its working folder
        # (server_files.py), writes nowhere but ``sandbox.writable`` (and a private /tmp), and has
        # the network its sandbox gives it.
        confinement = self._confinement
        group = await anyio.to_thread.run_sync(_server_group, confinement)
        program = self.argv[0]
        self.readable = await anyio.to_thread.run_sync(
            server_files.readable, program, self.argv[1:], self.cwd, self._sandbox.private)
        jail = await self._sandbox.prepare(
            self.argv, env=self.env, cwd=self.cwd or os.path.dirname(program), workspace=None,
            read_only=[*python_paths(), *self.readable], confinement=confinement)
        self.confined_by = cast("SandboxMechanism", jail.mechanism)
        if group is not None:
            jail.argv = [*_entering(group), *jail.argv]
        try:
            child = await jail.spawn(label=f"[{self.label}]", cwd=self.cwd, stderr_lines=self.stderr_lines,
                                     stderr_line_chars=1000, logger=log)
        except BaseException:
            if group is not None:
                group.remove()
            raise
        if group is not None:
            self._group = group
            child.on_stop(self._note_limits)  # read before the group goes
            child.on_stop(group.remove)  # kills what is left in it (a setsid daemon), then removes it
        return child

    def sandbox_hint(self) -> str | None:
        """When the sandbox is what stopped the server (a file it could not see, a write it could not
        make, a connection it could not open, read from its stderr): what, and the setting that allows
        it; else None."""
        if self._confinement is None or self._child is None:
            return None
        # The raw lines: a masked path could not be checked against what the sandbox shows. The
        # hint is masked as the stderr lines are.
        found = hints.server_hint("\n".join(self.stderr_tail), self._confinement, self.confined_by,
                                  [*python_paths(), *self.readable])
        return clean(found) if found is not None else None

    def _note_limits(self) -> None:
        self.memory_killed()

    def memory_killed(self) -> str | None:
        """When the kernel killed the sandboxed server at its memory limit: words saying so, with
        the limit and the setting that raises it; else None."""
        if self._oom_killed is None and self._group is not None and not self._group.removed:
            self._oom_killed = self._group.oom_kills() > 0
        if not self._oom_killed or self._confinement is None:
            return None
        return (f"was killed at its sandbox's memory limit of {format_size(self._confinement.memory_bytes)} "
                "(sandbox.memory raises it)")

    # -- pipes -------------------------------------------------------------------------------------

    def _parse(self, line: bytes) -> SessionMessage | None:
        # The SDK is loaded before the session reads its first message (Connector.load_sdk).
        from mcp.shared.message import SessionMessage
        from mcp_types import jsonrpc_message_adapter

        line = line.rstrip(b"\r")
        if not line.strip():
            return None
        try:
            message = jsonrpc_message_adapter.validate_json(line, by_name=False)
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
        import mcp_types as types
        from mcp.shared.message import SessionMessage

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

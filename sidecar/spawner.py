"""Children started off the event loop, on one thread that lives as long as the sidecar (Linux).

A fork holds the thread that calls it until the child runs ``exec`` (Python forks with vfork), and
asyncio's subprocess transport forks on the event loop's thread, then (Python 3.11) starts a thread
per child to wait for its exit, and starting a thread waits until it first runs: on a busy machine
the new child or thread can wait tens of ms for a CPU, and no request is answered meanwhile
(``ping`` stalls of 20-150 ms were measured while hostile tools ran, each one a ``run_command`` or a
worker being started). Here the fork happens on the spawner thread, and the loop only waits on
pipes and on a pidfd. The parent-death signal (``setpriv --pdeathsig``) is tied to the thread that forked:
this one never exits.

    process = await start(command, stdin=PIPE, stdout=PIPE, stderr=fd, cwd=..., env=..., pass_fds=...)
    await process.stdin.send(b"...")   # anyio byte streams over the pipes
    code = await process.wait()         # from the pidfd: no thread per child
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from typing import IO, Any, TypeVar

import anyio
import anyio.abc
import anyio.from_thread
import anyio.lowlevel

from .ndjson import send_all

T = TypeVar("T")
PIPE = subprocess.PIPE


class _Thread:
    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    async def run(self, fn: Callable[[], T]) -> T:
        """``fn()`` on the spawner thread; not cancellable (a child started must be returned)."""
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, name="sidecar-spawner", daemon=True)
                self._thread.start()
        token = anyio.lowlevel.current_token()
        done = anyio.Event()
        box: dict[str, Any] = {}

        def job() -> None:
            try:
                box["value"] = fn()
            except BaseException as exc:  # noqa: BLE001 - handed to the caller, raised there
                box["error"] = exc
            with suppress(RuntimeError):  # the loop is gone: nobody waits any more
                anyio.from_thread.run_sync(done.set, token=token)

        self._jobs.put(job)
        with anyio.CancelScope(shield=True):
            await done.wait()
        if "error" in box:
            raise box["error"]
        return box["value"]

    def _serve(self) -> None:
        while True:
            self._jobs.get()()


_spawner = _Thread()


async def start(command: Sequence[str], *, stdin: int | IO[Any] | None, stdout: int | IO[Any] | None,
                stderr: int | IO[Any] | None, cwd: str | os.PathLike[str] | None, env: Mapping[str, str],
                pass_fds: Sequence[int] = (), then: Callable[[], T] | None = None) -> tuple[PidfdProcess, T | None]:
    """Start ``command`` in a new session from the spawner thread (``PIPE``: an anyio stream);
    ``then()`` also runs there, after the fork (what starts a thread: that waits for it too).

    Raises:
        OSError: the child could not be started.
    """
    parent: list[int] = []  # our ends of the pipes
    child_ends: list[int] = []

    def pipe(spec: int | IO[Any] | None, ours_reads: bool) -> int | IO[Any] | None:
        if spec != PIPE:
            return spec
        read, write = os.pipe()
        parent.append(read if ours_reads else write)
        child_ends.append(write if ours_reads else read)
        return write if ours_reads else read

    def fork() -> tuple[subprocess.Popen[bytes], T | None]:
        popen = subprocess.Popen(list(command), stdin=pipe(stdin, False), stdout=pipe(stdout, True),  # noqa: S603 - the caller's command
                                 stderr=stderr, cwd=cwd, env=dict(env), start_new_session=True,
                                 pass_fds=tuple(pass_fds))
        return popen, then() if then is not None else None

    stdin_end = stdout_end = None
    try:
        popen, extra = await _spawner.run(fork)
    except BaseException:
        for fd in parent:
            os.close(fd)
        raise
    finally:
        for fd in child_ends:
            os.close(fd)
    ends = iter(parent)
    if stdin == PIPE:
        stdin_end = _PipeSend(next(ends))
    if stdout == PIPE:
        stdout_end = _PipeReceive(next(ends))
    return PidfdProcess(popen, stdin_end, stdout_end), extra


class PidfdProcess(anyio.abc.Process):
    """A child whose exit the event loop learns from a pidfd, with anyio streams over its pipes."""

    def __init__(self, popen: subprocess.Popen[bytes], stdin: _PipeSend | None, stdout: _PipeReceive | None) -> None:
        self._popen = popen
        self._stdin = stdin
        self._stdout = stdout
        self._pidfd: int | None = None
        self._watching: anyio.Event | None = None
        with suppress(OSError):
            self._pidfd = os.pidfd_open(popen.pid)

    async def wait(self) -> int:
        while (code := self._popen.poll()) is None:
            if self._pidfd is None:  # no pidfd (it could not be opened): look every 10 ms
                await anyio.sleep(0.01)
            elif self._watching is None:  # one task watches the pidfd, the others wait for it
                self._watching = anyio.Event()
                try:
                    await anyio.wait_readable(self._pidfd)
                finally:
                    self._watching.set()
                    self._watching = None
            else:
                await self._watching.wait()
        self._close_pidfd()
        return code

    def _close_pidfd(self) -> None:
        if self._pidfd is not None and self._watching is None:
            os.close(self._pidfd)
            self._pidfd = None

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def send_signal(self, signal: int) -> None:
        self._popen.send_signal(signal)

    @property
    def pid(self) -> int:
        return self._popen.pid

    @property
    def returncode(self) -> int | None:
        return self._popen.poll()  # reaps the child once it exited

    @property
    def stdin(self) -> anyio.abc.ByteSendStream | None:
        return self._stdin

    @property
    def stdout(self) -> anyio.abc.ByteReceiveStream | None:
        return self._stdout

    @property
    def stderr(self) -> anyio.abc.ByteReceiveStream | None:
        return None  # given to a file or a StderrTail, never an anyio stream

    async def aclose(self) -> None:
        for stream in (self._stdin, self._stdout):
            if stream is not None:
                await stream.aclose()
        with anyio.CancelScope(shield=True):
            await self.wait()


class _PipeSend(anyio.abc.ByteSendStream):
    def __init__(self, fd: int) -> None:
        os.set_blocking(fd, False)
        self._fd = fd

    async def send(self, item: bytes) -> None:
        if self._fd < 0:
            raise anyio.ClosedResourceError
        await send_all(self._fd, item)

    async def aclose(self) -> None:
        _close(self)


class _PipeReceive(anyio.abc.ByteReceiveStream):
    def __init__(self, fd: int) -> None:
        os.set_blocking(fd, False)
        self._fd = fd

    async def receive(self, max_bytes: int = 65536) -> bytes:
        while True:
            if self._fd < 0:
                raise anyio.ClosedResourceError
            try:
                data = os.read(self._fd, max_bytes)
            except BlockingIOError:
                await anyio.wait_readable(self._fd)
                continue
            if not data:
                raise anyio.EndOfStream
            return data

    async def aclose(self) -> None:
        _close(self)


def _close(stream: _PipeSend | _PipeReceive) -> None:
    fd, stream._fd = stream._fd, -1  # noqa: SLF001 - the two stream classes of this module
    if fd >= 0:
        anyio.notify_closing(fd)  # a task waiting on it gets ClosedResourceError, not a stale fd
        os.close(fd)

"""Byte transports under a connection: stdio for the real process, memory pipes for tests.

A transport hands the connection batches of complete lines and takes joined writes. A pipe or
socket (what a desktop app gives its child) is read on the event loop when it is readable: no
thread hop per message. Anything else (a tty, a file, Windows) is read on a feeder thread, so a
blocking read never stalls the loop. Either way everything one ``read`` produced is handed over
at once, and nothing is read while the connection is behind, so a fast client cannot grow our
memory.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import stat
import sys
import threading
from typing import Protocol

import anyio
import anyio.from_thread
import anyio.lowlevel
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from ..ndjson import Data, Frame, LineSplitter, send_all

if sys.platform != "win32":
    import fcntl

log = logging.getLogger("sidecar.rpc")

READ_CHUNK = 1 << 16


class Transport(Protocol):
    async def receive(self) -> list[Frame]:
        """Next batch of frames; raises ``anyio.EndOfStream`` at end of input."""
        ...

    async def send(self, data: Data) -> None:
        """Write all of ``data``; raises ``anyio.BrokenResourceError`` when the peer is gone."""
        ...

    def try_send(self, data: Data) -> int:
        """Write what can be written without waiting; returns how many bytes (0: use ``send``)."""
        ...

    def has_input(self) -> bool:
        """Input has arrived that ``receive`` has not returned yet (as far as can be seen now)."""
        ...

    async def aclose(self) -> None: ...


class StdioTransport:
    """Reads NDJSON from ``read_fd`` on a feeder thread and writes to ``write_fd``."""

    def __init__(self, read_fd: int, write_fd: int, max_line_bytes: int, queue_batches: int = 8):
        self._read_fd = read_fd
        self._write_fd = write_fd
        self._splitter = LineSplitter(max_line_bytes)
        send, recv = anyio.create_memory_object_stream[list[Frame]](queue_batches)
        self._batches_in: MemoryObjectSendStream[list[Frame]] = send
        self._batches_out: MemoryObjectReceiveStream[list[Frame]] = recv
        self._thread: threading.Thread | None = None
        self._nonblocking = _pollable(write_fd)
        if self._nonblocking:
            os.set_blocking(write_fd, False)
            _widen(write_fd)
        self._poll_reads = _pollable(read_fd)
        if self._poll_reads:
            os.set_blocking(read_fd, False)
        self._at_eof = False

    def start(self) -> None:
        if self._poll_reads:
            return
        token = anyio.lowlevel.current_token()
        self._thread = threading.Thread(
            target=self._feed, args=(token,), name="sidecar-stdin", daemon=True
        )
        self._thread.start()

    def _feed(self, token: anyio.lowlevel.EventLoopToken) -> None:
        try:
            while True:
                try:
                    chunk = os.read(self._read_fd, READ_CHUNK)
                except OSError as exc:
                    log.warning("reading stdin failed: %s", exc)
                    chunk = b""
                frames = self._splitter.feed(chunk) if chunk else self._splitter.finish()
                if frames:
                    anyio.from_thread.run(self._batches_in.send, frames, token=token)
                if not chunk:
                    break
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, RuntimeError):
            return  # the loop is gone or stopped listening: nothing left to feed
        try:
            anyio.from_thread.run_sync(self._batches_in.close, token=token)
        except RuntimeError:
            pass

    async def receive(self) -> list[Frame]:
        if not self._poll_reads:
            return await self._batches_out.receive()
        yielded = False
        while not self._at_eof:
            try:
                chunk = os.read(self._read_fd, READ_CHUNK)
            except BlockingIOError:
                if not yielded:
                    # Let the requests just dispatched start first: arming the fd's watch costs
                    # more than their way to the point where they wait.
                    yielded = True
                    await anyio.lowlevel.checkpoint()
                    continue
                await anyio.wait_readable(self._read_fd)
                continue
            except OSError as exc:
                log.warning("reading stdin failed: %s", exc)
                chunk = b""
            if not chunk:
                self._at_eof = True
                frames = self._splitter.finish()
            else:
                frames = self._splitter.feed(chunk)
            if frames:
                return frames
        raise anyio.EndOfStream

    async def send(self, data: Data) -> None:
        if not self._nonblocking:
            await anyio.to_thread.run_sync(_write_all, self._write_fd, data)
            return
        await send_all(self._write_fd, data)

    def has_input(self) -> bool:
        if not self._poll_reads:
            return self._batches_out.statistics().current_buffer_used > 0
        return bool(select.select([self._read_fd], [], [], 0)[0])

    def try_send(self, data: Data) -> int:
        if not self._nonblocking:
            return 0
        try:
            return os.write(self._write_fd, data)
        except BlockingIOError:
            return 0
        except (BrokenPipeError, ConnectionResetError) as exc:
            raise anyio.BrokenResourceError from exc

    async def aclose(self) -> None:
        self._batches_out.close()


def _pollable(fd: int) -> bool:
    # A pipe or socket is ours alone and can be non-blocking; a tty or file is shared with other
    # processes, so flipping it to non-blocking would surprise them.
    mode = os.fstat(fd).st_mode
    return sys.platform != "win32" and (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode))


PIPE_BYTES = 1 << 20  # Linux's default cap for an unprivileged process (/proc/sys/fs/pipe-max-size)


def _widen(fd: int) -> None:
    """Let the pipe to the client hold 1 MiB instead of 64 KiB (Linux only): a big answer then
    goes out in 16 times fewer turns of our loop, and the client reads on without waiting for
    us to refill the pipe. Best effort: a socket, or a user over the kernel's pipe quota, keeps
    what it has."""
    if sys.platform == "linux" and stat.S_ISFIFO(os.fstat(fd).st_mode):
        with contextlib.suppress(OSError):
            fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)


def _write_all(fd: int, data: Data) -> None:
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(fd, view) :]
    except (BrokenPipeError, ConnectionResetError) as exc:
        raise anyio.BrokenResourceError from exc


class MemoryTransport:
    """One end of an in-memory pipe; bytes are split into lines exactly as on stdio."""

    def __init__(
        self,
        incoming: MemoryObjectReceiveStream[bytes],
        outgoing: MemoryObjectSendStream[bytes],
        max_line_bytes: int,
    ) -> None:
        self._incoming = incoming
        self._outgoing = outgoing
        self._splitter = LineSplitter(max_line_bytes)
        self._eof = False
        self._receiving = False

    async def receive(self) -> list[Frame]:
        while not self._eof:
            try:
                self._receiving = True
                try:
                    chunk = await self._incoming.receive()
                finally:
                    self._receiving = False
            except (anyio.EndOfStream, anyio.ClosedResourceError):
                self._eof = True
                frames = self._splitter.finish()
                if frames:
                    return frames
                break
            frames = self._splitter.feed(chunk)
            if frames:
                return frames
        raise anyio.EndOfStream

    async def send(self, data: Data) -> None:
        try:
            await self._outgoing.send(bytes(data))
        except anyio.ClosedResourceError as exc:
            raise anyio.BrokenResourceError from exc

    def has_input(self) -> bool:
        stats = self._incoming.statistics()
        # A chunk sent while we wait is handed over at once: we are then no longer among the
        # waiting receivers, though we have not returned it yet.
        return stats.current_buffer_used > 0 or (self._receiving and not stats.tasks_waiting_receive)

    def try_send(self, data: Data) -> int:
        try:
            self._outgoing.send_nowait(bytes(data))
        except anyio.WouldBlock:
            return 0
        except (anyio.ClosedResourceError, anyio.BrokenResourceError) as exc:
            raise anyio.BrokenResourceError from exc
        return len(data)

    async def aclose(self) -> None:
        self._outgoing.close()
        self._incoming.close()


def memory_pair(
    max_line_bytes: int = 1 << 20, buffer: int = 64
) -> tuple[MemoryTransport, MemoryTransport]:
    """Two transports wired to each other: what one sends, the other receives."""
    a_send, b_recv = anyio.create_memory_object_stream[bytes](buffer)
    b_send, a_recv = anyio.create_memory_object_stream[bytes](buffer)
    return (
        MemoryTransport(a_recv, a_send, max_line_bytes),
        MemoryTransport(b_recv, b_send, max_line_bytes),
    )

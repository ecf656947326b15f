"""NDJSON framing: bytes in, complete lines out, with a cap on line length; bytes out to a pipe.

An over-long line is not buffered: the splitter drops its bytes up to the next newline and emits a
``LineTooLong`` marker in its place, so a hostile peer cannot make the reader hold more than the cap
and the stream stays in sync for the next line.

A leaf that imports nothing of sidecar, so any room may use it: the engine (``rpc/``, which imports
nothing else of sidecar) reads its stdin with it and writes its stdout with ``send_all``; below the
engine, the toolset worker's client (``tools/providers/python/worker.py``) splits the worker's
replies with it and the spawner writes its pipe with ``send_all``; the test client reads with it.
"""

from __future__ import annotations

import os
from typing import NamedTuple

import anyio


class LineTooLong(NamedTuple):
    size: int  # bytes seen before the newline (at least the cap + 1)


# A line gathered from several reads is handed over in the buffer it was gathered in once it is
# this long: copying a 15 MB answer into bytes would hold the event loop for milliseconds.
HAND_OVER_BYTES = 1 << 16

Line = bytes | bytearray
Frame = Line | LineTooLong


class LineSplitter:
    __slots__ = ("_buf", "_max", "_skipped", "_skipping")

    def __init__(self, max_line_bytes: int) -> None:
        self._max = max_line_bytes
        self._buf = bytearray()
        self._skipping = False
        self._skipped = 0

    def feed(self, chunk: bytes) -> list[Frame]:
        out: list[Frame] = []
        start = 0
        if self._skipping:
            nl = chunk.find(b"\n")
            if nl < 0:
                self._skipped += len(chunk)
                return out
            out.append(LineTooLong(self._skipped + nl))
            self._skipping = False
            self._skipped = 0
            start = nl + 1
        while True:
            nl = chunk.find(b"\n", start)
            if nl < 0:
                break
            line: Line
            if self._buf:
                self._buf += memoryview(chunk)[start:nl]
                if len(self._buf) >= HAND_OVER_BYTES:
                    line, self._buf = self._buf, bytearray()
                else:
                    line = bytes(self._buf)
                    self._buf.clear()
            else:
                line = chunk[start:nl]
            self._emit(line, out)
            start = nl + 1
        rest = len(chunk) - start
        if rest:
            if len(self._buf) + rest > self._max:
                self._skipping = True
                self._skipped = len(self._buf) + rest
                self._buf.clear()
            else:
                self._buf += memoryview(chunk)[start:]
        return out

    def finish(self) -> list[Frame]:
        """End of input: a last line without its newline still counts."""
        out: list[Frame] = []
        if self._skipping:
            out.append(LineTooLong(self._skipped))
        elif self._buf:
            self._emit(self._buf, out)
        self._buf = bytearray()
        self._skipping = False
        return out

    def _emit(self, line: Line, out: list[Frame]) -> None:
        if len(line) > self._max:
            out.append(LineTooLong(len(line)))
            return
        if line.endswith(b"\r"):
            line = line[:-1]
        if line and not line.isspace():
            out.append(line)


# What goes out: a big message is a bytearray (encoded in place) or a view of what is left of one.
Data = bytes | bytearray | memoryview


async def send_all(fd: int, data: Data) -> None:
    """Write all of ``data`` to the non-blocking pipe ``fd``, waiting while it is full.

    Raises:
        anyio.BrokenResourceError: the reading end is closed.
        anyio.ClosedResourceError: ``fd`` was closed (``anyio.notify_closing``) while waiting.
    """
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view):]
        except BlockingIOError:
            await anyio.wait_writable(fd)
        except (BrokenPipeError, ConnectionResetError) as exc:
            raise anyio.BrokenResourceError from exc

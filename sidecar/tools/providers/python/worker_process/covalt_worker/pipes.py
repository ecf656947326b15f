"""Reading and writing the worker's pipes with plain file descriptors (no buffering to lose)."""

from __future__ import annotations

import os
import select
from collections.abc import Callable, Iterator


def request_lines(fd: int, idle_seconds: float, before_wait: Callable[[], None], wake: int) -> Iterator[bytes]:
    """Request lines from ``fd`` until EOF, or until no request came for ``idle_seconds``;
    ``before_wait`` runs whenever no whole line is buffered, and again whenever ``wake`` (the
    signal wake-up pipe: a call's child has exited) is readable while none is."""
    buf = bytearray()
    while True:
        nl = buf.find(b"\n")
        if nl >= 0:
            line = bytes(buf[:nl])
            del buf[: nl + 1]
            if line.strip():
                yield line
            continue
        before_wait()
        ready = _wait_readable((fd, wake), idle_seconds)
        if not ready:
            return
        if wake in ready:
            drain(wake)
            if fd not in ready:
                continue
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return
        buf += chunk


def _wait_readable(fds: tuple[int, ...], timeout: float) -> list[int]:
    while True:
        try:
            return select.select(fds, [], [], timeout)[0]
        except InterruptedError:  # pragma: no cover - PEP 475 retries; kept for signal handlers that raise
            continue


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)


def read_some(fd: int) -> bytes | None:
    """What a non-blocking pipe holds, b"" at EOF, None when it holds nothing yet."""
    try:
        return os.read(fd, 1 << 20)
    except BlockingIOError:
        return None


def read_rest(fd: int) -> bytes:
    chunks = []
    while chunk := read_some(fd):
        chunks.append(chunk)
    return b"".join(chunks)


def drain(fd: int) -> None:
    while read_some(fd):
        pass

"""Processes the tests start: fixture servers, and whether they are still running."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio

from tests.timing import scaled


def gone(pid: int) -> bool:
    """A zombie counts as gone: it runs nothing and only waits for a parent (PID 1 here may not reap)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):  # ESRCH while the process is being reaped
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def host_pid(who: str) -> int | None:
    """The pid, as this process sees it, of a tool that named itself as
    ``f"{os.readlink('/proc/self/ns/pid')} {os.getpid()}"``: inside a sandbox's own pid namespace,
    its own pid means nothing out here."""
    namespace, inner = who.rsplit(" ", 1)
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.readlink(f"/proc/{entry}/ns/pid") != namespace:
                continue
            status = Path(f"/proc/{entry}/status").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("NSpid:") and line.split()[-1] == inner:
                return int(entry)
    return None


def alive(pid: int) -> bool:
    return not gone(pid)


async def wait_gone(pid: int, timeout: float = 3) -> bool:
    """Wait for the process to exit: its pidfd turns readable then (a zombie counts, as in gone())."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        with anyio.move_on_after(scaled(timeout)):
            await anyio.wait_readable(fd)
    finally:
        os.close(fd)
    return gone(pid)


@asynccontextmanager
async def served(argv: list[str], *, timeout: float = 20, quiet: bool = False) -> AsyncIterator[list[bytes]]:
    """A fixture server in its own process group; yields the words of the first line it prints
    (its ports), and kills the whole group at the end."""
    proc = await anyio.open_process(argv, stderr=subprocess.DEVNULL if quiet else None, start_new_session=True)
    try:
        assert proc.stdout is not None
        line = b""
        with anyio.fail_after(scaled(timeout)):
            while b"\n" not in line:
                line += await proc.stdout.receive()
        yield line.split(b"\n")[0].split()
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        with anyio.CancelScope(shield=True):
            await proc.wait()
            await proc.aclose()

"""Process hygiene: the stdout claim, the instance lock, what a crashed run left behind, the parent
watchdog and exit codes."""

from __future__ import annotations

import gc
import logging
import os
import sys
import threading
import time
from pathlib import Path

import anyio

from .errors import InstanceLocked

log = logging.getLogger("sidecar.process")

EXIT_OK = 0
EXIT_WITHOUT_SHUTDOWN = 1
EXIT_USAGE = 2
EXIT_LOCKED = 3
EXIT_STORAGE = 4


def claim_stdio() -> tuple[int, int]:
    """Take private copies of fd 0 and fd 1 for the protocol, then point fd 1 at stderr and fd 0
    at /dev/null. A stray ``print``, a C library or a child process inheriting our descriptors
    can then never write into (or read from) the wire. Returns (wire_in, wire_out)."""
    wire_in = os.dup(0)
    wire_out = os.dup(1)  # os.dup makes these non-inheritable: children never get the wire
    os.dup2(2, 1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    sys.stdout = sys.stderr
    sys.stdin = open(os.devnull)  # noqa: SIM115 - lives as long as the process
    return wire_in, wire_out


class InstanceLock:
    """An exclusive OS lock on ``<data dir>/sidecar.lock`` holding our pid; the OS drops it when
    the process dies, however it dies, so a stale file never blocks a restart."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            _lock(fd)
        except OSError:
            holder = _read_pid(fd)
            os.close(fd)
            raise InstanceLocked(str(self.path), holder) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing drops the lock
            self._fd = None


# Temporary files and folders a sidecar killed mid-way leaves in its data directory, as globs:
# half-written blobs (written to a temp file, then renamed in), scratch folders of tool calls made
# outside a chat, stat caches and the sandbox probe's record half saved.
CRASH_LEFTOVERS = ("scratch/*", "downloads/*", "chats/*/blobs/tmp/*", "chats/*/statcache.tmp",
                   ".sandbox-probe.json.*.tmp")


def sweep_crash_leftovers(data_dir: Path) -> threading.Thread:
    """Remove what a crashed run left (``CRASH_LEFTOVERS``) on a thread, so start-up never waits
    for it. Only entries older than this call go: newer ones are this run's own, being written.
    Call it once the instance lock is held, so no other live sidecar owns what it removes."""
    before = time.time()

    def sweep() -> None:
        removed = 0
        for pattern in CRASH_LEFTOVERS:
            for path in data_dir.glob(pattern):
                try:
                    if path.lstat().st_mtime >= before:
                        continue
                    if path.is_dir() and not path.is_symlink():
                        import shutil  # only when there is a folder to remove: with bz2 and lzma, ms at start

                        shutil.rmtree(path)
                    else:
                        path.unlink()
                    removed += 1
                except OSError as exc:
                    log.warning("cannot remove %s left by an earlier run: %s", path, exc)
        if removed:
            log.info("removed %d temporary files and folders an earlier run left behind", removed)

    thread = threading.Thread(target=sweep, name="sweep-leftovers", daemon=True)
    thread.start()
    return thread


if sys.platform == "win32":
    import msvcrt

    def _lock(fd: int) -> None:
        os.lseek(fd, 0, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)

    def _read_pid(fd: int) -> int | None:
        return None  # the holder's byte range is locked against reads on Windows

    def pid_alive(pid: int) -> bool:
        import ctypes

        kernel32 = ctypes.windll.kernel32
        handle = kernel32.OpenProcess(0x1000, False, pid)  # PROCESS_QUERY_LIMITED_INFORMATION
        if not handle:
            return False
        code = ctypes.c_ulong()
        kernel32.GetExitCodeProcess(handle, ctypes.byref(code))
        kernel32.CloseHandle(handle)
        return code.value == 259  # STILL_ACTIVE

else:
    import fcntl

    def _lock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)

    def _read_pid(fd: int) -> int | None:
        try:
            os.lseek(fd, 0, os.SEEK_SET)
            return int(os.read(fd, 32).decode().strip() or 0) or None
        except (OSError, ValueError):
            return None

    def pid_alive(pid: int) -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True  # exists, owned by someone else
        return True


async def watch_parent(pid: int, interval: float) -> None:
    """Return once process ``pid`` is gone (or, on POSIX, once we were re-parented away from it)."""
    while True:
        if not pid_alive(pid) or (sys.platform != "win32" and pid == _original_ppid and os.getppid() != pid):
            log.info("parent process %d is gone", pid)
            return
        await anyio.sleep(interval)


_original_ppid = os.getppid()


def rss_bytes() -> int:
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak if sys.platform == "darwin" else peak * 1024


def freeze_heap() -> None:
    """Take every object alive now out of the collector's walks (in the sidecar's own process: see
    ``own_process``). What is alive right after start-up or after the MCP SDK is imported (modules,
    classes, the services) lives as long as the process, yet a full collection walks all of it with
    the event loop held: about 100,000 objects once the SDK is in, 40-70 ms on these machines, a
    stall every so often. Garbage made later is collected as before."""
    if _own_process:
        gc.freeze()


SWITCH_INTERVAL = 0.001
"""How long a thread may hold the GIL while another waits for it (Python's default: 5 ms). The
event loop gives it up at every wait for I/O and must then wait up to this long for it back from a
busy worker thread (the service modules and the MCP SDK import in one for seconds at start-up).
A 5 ms timer on the loop while a thread imported both, on a loaded 2-core machine: median lag
17-30 ms at 5 ms, 9-15 ms at 1 ms. The cost, more switches, is paid only while both want the GIL."""


def own_process() -> None:
    """This process is the sidecar's alone (``python -m sidecar``): its heap may be frozen and its
    threads switch at ``SWITCH_INTERVAL``. Not so for an app served in a test's process, whose heap
    holds what earlier tests left."""
    global _own_process
    _own_process = True
    sys.setswitchinterval(SWITCH_INTERVAL)


_own_process = False

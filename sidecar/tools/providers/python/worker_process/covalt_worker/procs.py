"""The worker's processes: the spare child of the next call, the whole tree below the worker
(stopped, killed and reaped when a call ends), and the worker's own set-up and exit."""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import sys
import time
from typing import Any

if sys.platform.startswith("linux"):
    import ctypes  # about 2 ms of the cold start: prctl for the subreaper, dumpable and death signal

    _LIBC: Any = ctypes.CDLL(None, use_errno=True)
else:
    _LIBC = None

_KILL_ROUNDS = 200  # tree walks while stopping a call's processes (a fork bomb keeps adding)
PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36


class Spare:
    """A forked child waiting for its call on ``params_w``; it answers on ``result_r``."""

    def __init__(self, pid: int, params_w: int, result_r: int, imported: int) -> None:
        self.pid = pid
        self.params_w = params_w
        self.result_r = result_r
        self.imported = imported
        self.status: int | None = None

    def poll(self) -> int | None:
        """Its wait status once it has exited (then it is reaped), else None."""
        if self.status is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere (kill_descendants)
                self.status = 0
            else:
                if pid:
                    self.status = status
        return self.status

    def alive(self) -> bool:
        return self.poll() is None

    def discard(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        self.close()
        if self.status is None:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self.pid, 0)

    def close(self) -> None:
        for fd in (self.params_w, self.result_r):
            if fd >= 0:
                os.close(fd)
        self.params_w = self.result_r = -1


def kill_descendants() -> None:
    """Stop, kill and reap every process below this one. A process this one is subreaper of is
    either its child or below one: with no child left there is nothing to walk."""
    if not _has_children():
        return
    me, stopped = os.getpid(), set()
    for _ in range(_KILL_ROUNDS):
        # Stopped first, all of them, so none forks a process the walk has not seen.
        found = _descendants(me) - stopped
        if not found:
            break
        for pid in found:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)
        stopped |= found
    for pid in stopped:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5.0  # a process in uninterruptible sleep dies when it wakes
    while _has_children() and time.monotonic() < deadline:
        time.sleep(0.001)


def _has_children() -> bool:
    """Reap the children that have exited; whether any is left."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return False
        if pid == 0:
            return True


def _descendants(root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return set()
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2:].split()
        if len(fields) > 1:
            children.setdefault(int(fields[1]), []).append(int(name))
    found: set[int] = set()
    todo = list(children.get(root, ()))
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo.extend(children.get(pid, ()))
    return found


def thread_count() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        threading = sys.modules.get("threading")
        return threading.active_count() if threading is not None else 1


def prctl(option: int, value: int) -> bool:
    if _LIBC is None:
        return False
    return _LIBC.prctl(option, value, 0, 0, 0) == 0


def ignore_signal(signum: int, frame: Any) -> None:
    """A handler that does nothing: its signal then wakes select through the wakeup fd."""


def claim_stdio() -> tuple[int, int]:
    """Private copies of fd 0 and 1 carry the protocol; fd 1 then points at stderr and fd 0 at
    /dev/null, so ``print``, ``os.write(1, ...)``, ``input()`` and child processes can neither
    corrupt nor consume it. ``os.dup`` makes the copies non-inheritable."""
    wire_in, wire_out = os.dup(0), os.dup(1)
    if sys.platform == "linux":
        # 1 MiB instead of 64 KiB: a big result then reaches the sidecar in 16 times fewer turns of
        # its event loop. Best effort: over the user's pipe quota the pipe keeps what it has.
        with contextlib.suppress(OSError):
            fcntl.fcntl(wire_out, fcntl.F_SETPIPE_SZ, 1 << 20)
    os.dup2(2, 1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    sys.stdout = open(1, "w", buffering=1, encoding="utf-8", errors="backslashreplace", closefd=False)  # noqa: SIM115 - lives as long as the process
    sys.stdin = open(os.devnull)  # noqa: SIM115 - lives as long as the process
    return wire_in, wire_out


def exit_worker(code: int) -> None:
    """Leave without waiting for threads, after killing every process of the calls (and the
    spare): the host may be gone, and then nobody else would."""
    kill_descendants()
    if os.getpgrp() == os.getpid():  # never signal a group we were merely started in
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        os.killpg(0, signal.SIGTERM)
    sys.stderr.flush()
    os._exit(code)


def die_with_parent(parent_pid: int | None) -> None:
    """On Linux, be killed when the sidecar dies, even by SIGKILL: the host normally arranges it
    before exec (setpriv), this covers hosts without setpriv. Elsewhere stdin EOF tells us."""
    if not sys.platform.startswith("linux") or parent_pid is None:
        return
    if not prctl(PR_SET_PDEATHSIG, signal.SIGKILL):
        return
    if os.getppid() != parent_pid:  # the sidecar died before the signal was armed
        os._exit(1)

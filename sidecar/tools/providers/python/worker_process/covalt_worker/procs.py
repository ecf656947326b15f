"""The worker's processes: the spare child of the next call, the whole tree below the worker
(stopped, killed and reaped when a call ends), and the worker's own set-up and exit."""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import select
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

if sys.platform.startswith("linux"):
    import ctypes  # about 2 ms of the cold start: prctl for the subreaper, dumpable and death signal

    _LIBC: Any = ctypes.CDLL(None, use_errno=True)
else:
    _LIBC = None

Members = Callable[[], "set[int] | None"]  # the pids in the worker's cgroup, None when unknown
_children_fd: int | None = None  # /proc/<me>/task/<me>/children, opened at first use (-1: none)
_KILL_ROUNDS = 200  # tree walks while stopping a call's processes (a fork bomb keeps adding)
_EXIT_WAIT = 1.0  # seconds a killed call's child gets to exit before its processes are walked
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
        self.answered = False  # its whole answer came and it was killed then, its exit not waited for

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


def pass_interrupt(pid: int) -> None:
    """SIGINT for a call's child that did not get the host's: the host signals the worker's whole
    process group, so a child still in it has it already, and a second SIGINT would raise
    KeyboardInterrupt again inside the ``finally`` the first one started (the tool would lose its
    grace to unwind). A child that left the group (setpgid, setsid) gets it from here."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if os.getpgid(pid) != os.getpgrp():
            os.kill(pid, signal.SIGINT)


def kill_descendants(keep: int = 0, dying: int = 0, members: Members | None = None) -> None:
    """Stop, kill and reap every process below this one but ``keep`` (the next call's spare, a
    child of this one that no call's process started). ``dying`` is a call's child killed after
    it answered: its exit is not waited for unless it left processes. ``members``: the processes
    of the worker's cgroup, which holds every process of the calls (None: no such group). A
    process this one is subreaper of is either its child or below one: with no other child left
    there is nothing to walk."""
    if not _others(keep, dying, members):
        return
    me, stopped = os.getpid(), {keep}
    deadline = time.monotonic() + 5.0  # a process in uninterruptible sleep dies when it wakes
    while True:
        for _ in range(_KILL_ROUNDS):
            # Stopped first, all of them, so none forks a process the walk has not seen.
            found = _descendants(me) - stopped
            if not found:
                break
            for pid in found:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGSTOP)
            stopped |= found
        for pid in stopped - {keep}:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if _whole_table():
            break
        # Only this process's own children can be seen (Landlock): theirs come to it as they
        # die, and the next walk finds them.
        time.sleep(0.001)
        if not _others(keep) or time.monotonic() > deadline:
            return
    while _others(keep) and time.monotonic() < deadline:
        time.sleep(0.001)


def _others(keep: int, dying: int = 0, members: Members | None = None) -> bool:
    """Reap the children that have exited; whether a process is left below this one other than
    ``keep`` and ``dying`` (with nothing of its own)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return False
        if pid == 0:
            break
    if not keep and not dying:
        return True
    # The dying child's own children first: one it leaves is moved to this process's list as it
    # exits, so read in this order, no process can be missed between the two reads.
    if dying:
        below = _children(dying)
        if below is None:
            # Its list cannot be read (Landlock shows only our own /proc entry). The cgroup of
            # the calls holds whatever it started, wherever in the tree; a process it is forking
            # this instant may not be in it yet, and is found once the child's exit is reaped
            # (``left_behind``). Without a group: once it has exited, what it left is ours (moved
            # before its exit is reported) and our own list tells. Either costs far less than the
            # walk below, which stops, kills and polls in 1 ms sleeps.
            held = members() if members is not None else None
            if held is not None:
                return bool(held - {keep, dying})
            if _exited(dying, _EXIT_WAIT):
                return _others(keep)
        if below != set():
            return True
    children = _children()
    if children is None:  # no /proc/<pid>/task/<tid>/children here: walk the whole table
        return bool(_descendants(os.getpid()) - {keep, dying})
    return bool(children - {keep, dying})


def left_behind(keep: int) -> bool:
    """Whether a child of this process other than ``keep`` is left (cheap: one read)."""
    children = _children()
    return children is None or bool(children - {keep})


def _exited(pid: int, timeout: float) -> bool:
    """Wait up to ``timeout`` seconds for the child ``pid`` (killed) to exit; whether it did."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True  # reaped already
    except (AttributeError, OSError):  # no pidfd (Linux < 5.3, another OS): the walk decides
        return False
    try:
        return bool(select.select([fd], [], [], timeout)[0])
    finally:
        os.close(fd)


def held_fds() -> tuple[int, ...]:
    """Descriptors this module keeps open, for a call's child to close."""
    return (_children_fd,) if _children_fd is not None and _children_fd >= 0 else ()


def _children(pid: int = 0) -> set[int] | None:
    """The children of this process (``pid`` 0) or of ``pid``, from small files
    rather than a walk of /proc; None when they cannot be read. Orphans this process adopts as
    subreaper are listed under its main thread, the one that forks, whose file stays open:
    reading it again costs a microsecond, opening it thirty."""
    global _children_fd
    if pid:
        try:
            if os.listdir(f"/proc/{pid}/task") != [str(pid)]:
                return None  # threads: a child moves between their lists as they exit
            with open(f"/proc/{pid}/task/{pid}/children", "rb") as f:
                return {int(child) for child in f.read().split()}
        except FileNotFoundError:
            return set()  # reaped: what it left was moved to this process's list before
        except OSError:
            return None
    if _children_fd is None:
        me = os.getpid()
        try:
            _children_fd = os.open(f"/proc/{me}/task/{me}/children", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            _children_fd = -1
    if _children_fd < 0:
        return None
    try:
        return {int(child) for child in os.pread(_children_fd, 1 << 16, 0).split()}
    except OSError:
        return None


@functools.cache
def _whole_table() -> bool:
    """Whether /proc lists every process (Landlock lets a process read only its own entry)."""
    try:
        os.listdir("/proc")
    except OSError:
        return False
    return True


def _descendants(root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:  # Landlock shows a process only its own /proc entry
        return (_children() or set()) if root == os.getpid() else set()
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

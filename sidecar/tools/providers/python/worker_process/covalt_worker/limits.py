"""The limits of one call: rlimits in its process, the worker's cgroup, and the watch that checks
what no rlimit enforces (its processes together, its workspace's growth)."""

from __future__ import annotations

import errno
import os
import resource
import signal
import sys
import time
import traceback
from typing import Any

from .messages import size_text
from .protocol import CallLimits, CgroupConfig, Config, Failure

NICE = 10  # added to a call's processes' niceness (CPU weight 110 against the sidecar's 1024)
POLL = 0.025  # seconds between checks of a running call's disk use and process count
SPARE = 1  # the next call's child waits in the call's cgroup while the call runs: not the tool's
_SETTINGS = {"memory": "sandbox.memory", "processes": "sandbox.processes", "disk": "sandbox.disk"}


class Cgroup:
    """The cgroup the host made for this worker's calls (v1: a folder per controller)."""

    def __init__(self, config: CgroupConfig) -> None:
        dirs = config.dirs
        self.version = config.version
        self.procs = [os.path.join(d, "cgroup.procs") for d in dirs.values()]
        self.pids = dirs.get("pids") or dirs.get("unified")
        self.memory = dirs.get("memory") or dirs.get("unified")
        self.limits: CallLimits | None = None
        self.fixed = config.fixed
        self.limited = config.limited  # False: the group only holds the calls' processes
        self.failed = False

    def enter(self, pid: int) -> None:
        for path in self.procs:
            self._write(path, str(pid))

    def members(self) -> set[int] | None:
        """The processes in the group: every process of the calls and the spare (each is moved in
        as it is forked, before its call; what it starts stays in). None when that is not known."""
        if self.failed or not self.procs:
            return None
        try:
            with open(self.procs[0], "rb") as f:
                return {int(pid) for pid in f.read().split()}
        except (OSError, ValueError):
            return None

    def set_limits(self, limits: CallLimits) -> None:
        if limits == self.limits or self.fixed or not self.limited:
            return
        self.limits = limits
        if self.pids:
            self._write(os.path.join(self.pids, "pids.max"), str(limits.max_processes + SPARE))
        if self.memory is None:
            return
        value = str(limits.memory_bytes)
        if self.version == 2:
            self._write(os.path.join(self.memory, "memory.max"), value)
            self._write(os.path.join(self.memory, "memory.swap.max"), "0", quiet=True)
            return
        memory = os.path.join(self.memory, "memory.limit_in_bytes")
        swap = os.path.join(self.memory, "memory.memsw.limit_in_bytes")  # only with swap accounting
        # memsw may never be below memory: the order depends on which way the limit moves.
        if not self._write(memory, value, quiet=True):
            self._write(swap, value, quiet=True)
            self._write(memory, value)
        else:
            self._write(swap, value, quiet=True)

    def pids_max_hits(self) -> int:
        return _counter(os.path.join(self.pids, "pids.events"), "max") if self.pids else 0

    def oom_kills(self) -> int:
        if self.memory is None:
            return 0
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        return _counter(os.path.join(self.memory, name), "oom_kill")

    def _write(self, path: str, value: str, quiet: bool = False) -> bool:
        try:
            with open(path, "w") as f:
                f.write(value)
        except OSError as exc:
            if not quiet and not self.failed:
                self.failed = True
                print(f"covalt worker: cannot write {value} to {path}: {exc.strerror}", file=sys.stderr)
            return False
        return True


class Watch:
    """The limits a running call is held to that no rlimit enforces: its processes together (the
    cgroup's counters) and the growth of its workspace's file system."""

    def __init__(self, limits: CallLimits, workspace: str, cgroup: Cgroup | None) -> None:
        self.limits = limits
        self.workspace = workspace
        self.cgroup = cgroup
        self.started = time.time()
        self.base = _fs_used(workspace)
        self.trigger = limits.disk_bytes  # growth of the file system that makes us look closer
        self.pids_hits = cgroup.pids_max_hits() if cgroup is not None else 0
        self.ooms = cgroup.oom_kills() if cgroup is not None else 0

    def check(self, final: bool = False) -> Failure | None:
        if not final and self.cgroup is not None and self.cgroup.pids_max_hits() > self.pids_hits:
            return limit_failure("processes", self.limits.max_processes,
                                  "the tool tried to run more processes at once than")
        return self.disk()

    def after_kill(self) -> Failure | None:
        """Why the call's process was killed by a signal, when a limit did it."""
        return self.memory_killed(stopped=True) or self.check()

    def memory_killed(self, stopped: bool = False, note: str = "", **data: Any) -> Failure | None:
        """The memory limit, when the kernel killed a process of this call for it: the cgroup's
        count of such kills grew (v1 ``memory.oom_control``, v2 ``memory.events``). The worker's
        cgroup holds one call at a time, so every kill it counts meanwhile is this call's."""
        if self.cgroup is None or self.cgroup.oom_kills() <= self.ooms:
            return None
        return limit_failure("memory", self.limits.memory_bytes, "the call's processes used more memory than",
                             killed=stopped, note=note, **data)

    def disk(self) -> Failure | None:
        if self.base is None:
            return None
        used = _fs_used(self.workspace)
        if used is None or used - self.base <= self.trigger:
            return None
        # The file system grew past the quota, perhaps by other writers: count what this call wrote.
        total, files = _written_since(self.workspace, self.started)
        if total <= self.limits.disk_bytes:
            self.trigger = used - self.base + self.limits.disk_bytes // 4
            return None
        listed = ", ".join(f"{name} ({size_text(size)})" for size, name in files)
        return limit_failure(
            "disk", self.limits.disk_bytes, f"the call wrote {size_text(total)} into its workspace, more than",
            note=f"The files it wrote are kept (they may be rewrites of your own files): {listed}; "
                 "delete the ones you do not need.")


def limit_failure(limit: str, value: int, lead: str, killed: bool = False, note: str = "", **data: Any) -> Failure:
    setting = _SETTINGS[limit]
    shown = f"{value} processes" if limit == "processes" else size_text(value)
    per_call = " per call" if limit == "disk" else ""
    stopped = "; the call was stopped" if limit != "memory" or killed else ""
    message = f"{limit} limit: {lead} its limit of {shown}{per_call} (raise it with {setting}){stopped}."
    if note:
        message += " " + note
    return Failure("limit", message, limit=limit, value=value, setting=setting, **data)


def limit_error(exc: OSError, limits: CallLimits) -> Failure | None:
    """The limit an error a tool let through comes from, if it is one of ours."""
    if exc.errno == errno.EFBIG:
        return limit_failure("disk", limits.disk_bytes, "the tool tried to write a file larger than")
    if exc.errno == errno.EAGAIN and _raised_by_fork(exc):
        return limit_failure("processes", limits.max_processes, "the tool tried to run more processes at once than")
    return None


def _raised_by_fork(exc: BaseException) -> bool:
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return False
    last = frames[-1]
    return "fork" in (last.line or "") or last.name in ("_execute_child", "_launch", "start_new_thread")


def _counter(path: str, name: str) -> int:
    """One counter of a cgroup's events file ("max 3", "oom_kill 1"); 0 when it cannot be read."""
    try:
        with open(path) as f:
            for line in f:
                key, _, value = line.partition(" ")
                if key == name:
                    return int(value)
    except (OSError, ValueError):
        pass
    return 0


def _fs_used(path: str) -> int | None:
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return (st.f_blocks - st.f_bfree) * st.f_frsize


def _written_since(folder: str, since: float, top: int = 5) -> tuple[int, list[tuple[int, str]]]:
    """Bytes on disk of the files under ``folder`` changed at or after ``since``, and the biggest."""
    total, found = 0, []
    stack = [folder]
    while stack:
        current = stack.pop()
        try:
            entries = list(os.scandir(current))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                    continue
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if entry.is_file(follow_symlinks=False) and st.st_mtime >= since - 1:
                size = st.st_blocks * 512
                total += size
                found.append((size, os.path.relpath(entry.path, folder)))
    found.sort(reverse=True)
    return total, found[:top]


def call_limits(limits: CallLimits, tasks: int | None, in_cgroup: bool) -> None:
    """The rlimits of a call's process, soft and hard, so neither it nor its children raise them.
    RLIMIT_DATA rather than RLIMIT_AS: glibc reserves 64 MiB of address space per thread arena."""
    set_limit("RLIMIT_DATA", limits.memory_bytes)
    set_limit("RLIMIT_FSIZE", limits.disk_bytes)
    if tasks is not None and not in_cgroup:
        # RLIMIT_NPROC caps all of the user's processes, not ours: leave room for what runs now.
        set_limit("RLIMIT_NPROC", tasks + limits.max_processes)


def apply_limits(config: Config) -> None:
    """The worker's own limits: soft ones, so each call's child can set its own (lower or higher)."""
    # An oversized write then fails with OSError (EFBIG) in the tool instead of killing its process.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    set_limit("RLIMIT_DATA", config.memory_bytes, soft_only=True)
    set_limit("RLIMIT_FSIZE", config.file_bytes, soft_only=True)


def set_limit(name: str, value: int, soft_only: bool = False) -> None:
    which = getattr(resource, name)
    _, hard = resource.getrlimit(which)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    try:
        # The hard limit too (in a call's child), so neither a tool nor its children can raise it.
        resource.setrlimit(which, (value, hard if soft_only else value))
    except (ValueError, OSError) as exc:
        print(f"covalt worker: cannot set {name} to {value}: {exc}", file=sys.stderr)


def user_tasks() -> int | None:
    """Threads the user runs now (what RLIMIT_NPROC counts on Linux); None without /proc."""
    try:
        entries = os.listdir("/proc")
    except OSError:
        return None
    uid, total = os.getuid(), 0
    for name in entries:
        if name.isdigit():
            try:
                if os.stat(f"/proc/{name}").st_uid == uid:
                    total += len(os.listdir(f"/proc/{name}/task"))
            except OSError:
                continue  # it exited meanwhile
    return total

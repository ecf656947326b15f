"""Cgroups that hold the calls of one tool worker: a process and a memory limit for everything a
call starts together, which rlimits (per process) cannot give.

Where one can be used:

- cgroup v2 (a systemd desktop): the sidecar's own cgroup, from ``/proc/self/cgroup``, when it is
  delegated to us (writable, with the ``memory`` and ``pids`` controllers available). v2 lets no
  cgroup hold processes and enable controllers for its children at once, so the sidecar first
  moves itself into a leaf of its own (``covalt-sidecar-<pid>``) when its cgroup holds only it.
- cgroup v1 (running as root, as on the CI machine): the sidecar's cgroup in the ``pids`` and the
  ``memory`` hierarchies, when both are writable.
- neither: ``kind`` is ``"rlimit"`` and the worker limits each call's process with rlimits.

Each worker gets ``covalt-<sidecar pid>-<n>`` beside the sidecar (one folder per hierarchy on v1);
its zygote moves each call's child into it and writes the call's limits (worker_process/covalt_worker). The
host removes it when the worker stops (``WorkerGroup.remove`` kills what is left in it first), and
``Cgroups.sweep`` removes those of a sidecar that was killed before it could (at the next start).

    cgroups = detect()                 # once per process
    cgroups.kind                       # "cgroup-v2" | "cgroup-v1" | "rlimit" (for status)
    group = cgroups.create()           # None with "rlimit", or when the folder cannot be made
    config["cgroup"] = group.config()  # what the worker needs
    group.remove()
"""

from __future__ import annotations

import itertools
import logging
import os
import re
import signal
import time
from contextlib import suppress
from functools import cache
from pathlib import Path
from typing import Any, Literal

log = logging.getLogger("sidecar.sandbox")

Kind = Literal["cgroup-v2", "cgroup-v1", "rlimit"]

ROOT = Path("/sys/fs/cgroup")
_V1_CONTROLLERS = ("pids", "memory")
_NAME = re.compile(r"^covalt-(?:sidecar-)?(\d+)(?:-\d+)?$")
_REMOVE_WAIT = 1.0  # seconds for the killed processes of a group to leave it
_numbers = itertools.count(1)


class WorkerGroup:
    """One worker's cgroup: a folder per hierarchy on v1, one folder on v2."""

    def __init__(self, version: int, dirs: dict[str, Path]) -> None:
        self.version = version
        self.dirs = dirs
        self.removed = False
        self.fixed = False  # its limits are set: the worker only moves processes in
        self.limited = True  # False: it has no limit files (controllers off); calls get rlimits

    def config(self) -> dict[str, Any]:
        return {"version": self.version, "dirs": {k: str(v) for k, v in self.dirs.items()}, "fixed": self.fixed,
                "limited": self.limited}

    def folders(self) -> list[str]:
        return [str(d) for d in self.dirs.values()]

    def procs_files(self) -> list[str]:
        """The files a sandboxed worker writes (its calls' pids): the only writable ones it sees."""
        return [str(d / "cgroup.procs") for d in self.dirs.values()]

    def set_limits(self, max_processes: int, memory_bytes: int) -> None:
        """Write the limits for all of the worker's calls (the worker then never writes them)."""
        pids = self.dirs.get("pids") or self.dirs.get("unified")
        memory = self.dirs.get("memory") or self.dirs.get("unified")
        values: dict[Path, int] = {}
        if pids is not None:
            values[pids / "pids.max"] = max_processes
        if memory is not None:
            values[memory / ("memory.max" if self.version == 2 else "memory.limit_in_bytes")] = memory_bytes
        missing = [path for path in values if not path.exists()]
        if missing:
            # The controllers are not enabled for it: the group still holds the calls' processes
            # (and kills them together), the worker limits each call with rlimits instead.
            self.limited = False
            log.warning("the cgroup %s has no %s (its controllers are not enabled): this worker's calls get "
                        "rlimits for memory and processes", missing[0].parent, " or ".join(p.name for p in missing))
            return
        try:
            for path, value in values.items():
                path.write_text(str(value))
        except OSError as exc:
            log.warning("cannot set the limits of the cgroup %s: %s", pids or memory, exc)
            return
        self.fixed = True

    def oom_kills(self) -> int:
        """How many of its processes the kernel killed at its memory limit (0 if unknown)."""
        folder = self.dirs.get("memory") or self.dirs.get("unified")
        name = "memory.oom_control" if self.version == 1 else "memory.events"
        try:
            text = (folder / name).read_text() if folder is not None else ""
        except OSError:
            return 0
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill" and value.strip().isdigit():
                return int(value)
        return 0

    def remove(self) -> None:
        """Kill what is left in it, then remove it. Idempotent; never raises."""
        if self.removed:
            return
        self.removed = True
        _kill_and_remove(list(self.dirs.values()))


class Cgroups:
    """What this machine offers, found once: the hierarchies' folders the sidecar may create in."""

    def __init__(self, kind: Kind, version: int, bases: dict[str, Path]) -> None:
        self.kind: Kind = kind
        self.version = version
        self.bases = bases  # controller ("pids", "memory", or "unified") -> the folder to create in

    def create(self) -> WorkerGroup | None:
        if not self.bases:
            return None
        name = f"covalt-{os.getpid()}-{next(_numbers)}"
        dirs: dict[str, Path] = {}
        try:
            for controller, base in self.bases.items():
                path = base / name
                path.mkdir()
                dirs[controller] = path
        except OSError as exc:
            log.warning("cannot create the cgroup %s: %s; this worker's calls get rlimits only", name, exc)
            _kill_and_remove(list(dirs.values()))
            return None
        return WorkerGroup(self.version, dirs)

    def sweep(self) -> int:
        """Remove the groups of sidecars that are no longer running; how many were removed."""
        removed = 0
        for base in self.bases.values():
            try:
                entries = list(base.iterdir())
            except OSError:
                continue
            for entry in entries:
                match = _NAME.match(entry.name)
                if match is None or not entry.is_dir() or _running(int(match[1])):
                    continue
                if _kill_and_remove([entry]):
                    removed += 1
        if removed:
            log.info("removed %d cgroups left by a sidecar that was killed", removed)
        return removed


@cache
def detect() -> Cgroups:
    """The cgroups this process may use (cached), with the leftovers of killed sidecars swept."""
    found = probe(ROOT, Path("/proc/self/cgroup"))
    found.sweep()
    return found


def probe(root: Path, self_cgroup: Path) -> Cgroups:
    """What ``root`` offers to the process whose ``/proc/<pid>/cgroup`` is ``self_cgroup``."""
    try:
        lines = self_cgroup.read_text().splitlines()
    except OSError:
        return Cgroups("rlimit", 0, {})
    paths: dict[str, str] = {}
    for line in lines:
        _, controllers, path = line.split(":", 2) if line.count(":") >= 2 else ("", "", "")
        for controller in controllers.split(",") if controllers else [""]:
            paths[controller] = path
    if (root / "cgroup.controllers").exists() and "" in paths:
        base = _v2_base(root / paths[""].lstrip("/"))
        if base is not None:
            return Cgroups("cgroup-v2", 2, {"unified": base})
        return Cgroups("rlimit", 0, {})
    bases = {c: root / c / paths[c].lstrip("/") for c in _V1_CONTROLLERS if c in paths}
    if len(bases) == len(_V1_CONTROLLERS) and all(_writable(b) for b in bases.values()):
        return Cgroups("cgroup-v1", 1, bases)
    return Cgroups("rlimit", 0, {})


def _v2_base(own: Path) -> Path | None:
    """The folder to create workers' groups in on v2: the sidecar's cgroup with ``memory`` and
    ``pids`` enabled for its children (moving the sidecar into a leaf first), or None."""
    if _NAME.match(own.name) and own.name.startswith("covalt-sidecar-"):
        own = own.parent  # moved into our leaf by an earlier probe of this process
    try:
        available = (own / "cgroup.controllers").read_text().split()
    except OSError:
        return None
    if not {"memory", "pids"} <= set(available):
        log.info("cgroup v2 at %s offers no memory and pids controllers (%s; bound to v1 hierarchies?): "
                 "tool calls get rlimits", own, " ".join(available) or "none")
        return None
    if not _writable(own):
        return None
    enable = own / "cgroup.subtree_control"
    if _enabled(enable):
        return own
    try:
        enable.write_text("+memory +pids")
        return own
    except OSError:
        pass  # EBUSY: processes in it (this one at least)
    try:
        leaf = own / f"covalt-sidecar-{os.getpid()}"
        leaf.mkdir(exist_ok=True)
        (leaf / "cgroup.procs").write_text(str(os.getpid()))
        enable.write_text("+memory +pids")
    except OSError as exc:
        log.info("cgroup v2 at %s is not delegated to us (%s): tool calls get rlimits", own, exc)
        return None
    return own


def _enabled(subtree_control: Path) -> bool:
    try:
        return {"memory", "pids"} <= set(subtree_control.read_text().split())
    except OSError:
        return False


def _writable(folder: Path) -> bool:
    return folder.is_dir() and os.access(folder, os.W_OK)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _kill_and_remove(dirs: list[Path]) -> bool:
    """SIGKILL every process in ``dirs`` until they are empty, then remove them; whether all went.
    On v2 (kernel 5.14+) ``cgroup.kill`` kills the whole group at once, so a process forking as
    fast as it can is not outrun; elsewhere each pid listed is killed, round after round."""
    deadline = time.monotonic() + _REMOVE_WAIT
    for folder in dirs:
        with suppress(OSError):
            (folder / "cgroup.kill").write_text("1")
        while True:
            pids = _procs(folder)
            for pid in pids:
                with suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            try:
                folder.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError as exc:
                if time.monotonic() > deadline:
                    log.warning("cannot remove the cgroup %s: %s", folder, exc)
                    return False
                time.sleep(0.005)
    return True


def _procs(folder: Path) -> list[int]:
    try:
        return [int(p) for p in (folder / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return []

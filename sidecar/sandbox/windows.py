"""Windows: a Job Object per tool process for its limits, and a plain statement of what is NOT confined.

UNTESTED ON WINDOWS HERE (the sidecar's machines run Linux): the order of the calls below is tested
with a recording stand-in for the win32 calls, and the ctypes structures' layout against the
documented one (tests/sandbox/test_windows.py); the calls themselves never ran.

Every process the runner starts (a Python worker, a ``run_command`` shell, an opted-in stdio MCP
server) is started suspended and put in a Job Object of its own before its first instruction runs:

- ``JOB_OBJECT_LIMIT_JOB_MEMORY``: ``sandbox.memory`` for the process and its children together
  (as the cgroup does on Linux), so a tool cannot split an allocation over many processes;
- ``JOB_OBJECT_LIMIT_ACTIVE_PROCESS``: ``sandbox.processes``;
- ``JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE``: the sidecar holds the job's only handle until the process
  is stopped; closing it (``Job.close``, or the sidecar ending in any way, a crash included) ends
  every process in it, so nothing of a tool outlives its call's process or the sidecar;
- ``JOB_OBJECT_LIMIT_DIE_ON_UNHANDLED_EXCEPTION``: no error dialog keeps a crashed tool alive.

A call's timeout or cancel stops its process with ``TerminateJobObject``: the whole tree at once,
since Windows has no process groups (``Child.signal_group``). A child the tool starts is in the
job too (jobs are inherited; nesting needs Windows 8, which every supported Windows has).

Everything else is NOT confined on Windows (``NOT_CONFINED``, shown by ``debug/info``): the tool runs
with the user's rights.
"""

from __future__ import annotations

from typing import NamedTuple, Protocol

from .policy import Confinement

NOT_CONFINED = (
    "files: a tool can read and write whatever the user can, not only its chat's workspace "
    "(sandbox.writable is not enforced)",
    "network: a tool can connect anywhere (sandbox.network none and allowedHosts are not enforced)",
    "other processes: a tool can see, signal, inspect or debug the user's other processes, "
    "the sidecar included",
    "disk: the per-call quota is measured after the call, not enforced while it runs",
)

# JOBOBJECT_BASIC_LIMIT_INFORMATION.LimitFlags (winnt.h)
LIMIT_ACTIVE_PROCESS = 0x0008
LIMIT_JOB_MEMORY = 0x0200
LIMIT_DIE_ON_UNHANDLED_EXCEPTION = 0x0400
LIMIT_KILL_ON_JOB_CLOSE = 0x2000
CREATE_SUSPENDED = 0x0000_0004  # CreateProcess's dwCreationFlags; subprocess passes it through
TERMINATED = 1  # the exit code TerminateJobObject gives the job's processes


def warning() -> str:
    """What debug/info says on Windows, worded for the user."""
    return ("no sandbox on Windows: a Job Object limits each tool's memory and processes and ends "
            "everything it started with its call; NOT confined: " + "; ".join(NOT_CONFINED))


class JobLimits(NamedTuple):
    flags: int
    active_processes: int
    job_memory: int


def limits_for(confinement: Confinement) -> JobLimits:
    return JobLimits(flags=LIMIT_ACTIVE_PROCESS | LIMIT_JOB_MEMORY | LIMIT_DIE_ON_UNHANDLED_EXCEPTION
                     | LIMIT_KILL_ON_JOB_CLOSE,
                     active_processes=confinement.max_processes, job_memory=confinement.memory_bytes)


class JobApi(Protocol):
    """The win32 calls a job needs, one each: ``win32job.Kernel32`` makes them, tests record them.
    Each raises OSError when Windows refuses."""

    suspended: int  # the creationflags that start a process suspended

    def create(self) -> int: ...
    def set_limits(self, job: int, limits: JobLimits) -> None: ...
    def assign(self, job: int, pid: int) -> None: ...
    def resume(self, pid: int) -> None: ...
    def terminate(self, job: int, exit_code: int) -> None: ...
    def active_processes(self, job: int) -> int: ...
    def close(self, job: int) -> None: ...


class Job:
    """The Job Object of one tool process: made with its limits before the process exists, the
    process put in it while suspended, then resumed; held until the process is stopped."""

    def __init__(self, api: JobApi, confinement: Confinement) -> None:
        self._api = api
        self._handle = api.create()
        try:
            # Limits before anything is in the job: nothing of the tool ever runs without them.
            api.set_limits(self._handle, limits_for(confinement))
        except BaseException:
            self.close()
            raise

    def adopt(self, pid: int) -> None:
        """Put the suspended process ``pid`` in the job, then let it run. The pid cannot name
        another process meanwhile: our Popen holds its handle until it is reaped."""
        self._api.assign(self._handle, pid)
        self._api.resume(pid)

    def terminate(self) -> None:
        """End every process in the job now (a timeout, a cancel, the stop ladder)."""
        if self._handle:
            self._api.terminate(self._handle, TERMINATED)

    def active(self) -> bool:
        """Whether any process of the job is still running."""
        return bool(self._handle) and self._api.active_processes(self._handle) > 0

    def close(self) -> None:
        """Let go of the job; KILL_ON_JOB_CLOSE ends whatever is still in it. Idempotent."""
        handle, self._handle = self._handle, 0
        if handle:
            self._api.close(handle)


def kernel32() -> JobApi:
    """The real calls (Windows only: ctypes.WinDLL exists there alone)."""
    from .win32job import Kernel32  # noqa: PLC0415 - ctypes, loaded only on Windows and only when a tool starts

    return Kernel32()

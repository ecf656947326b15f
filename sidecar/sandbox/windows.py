"""Windows: a Job Object per tool process for its limits, and a plain statement of what is NOT confined.

UNTESTED HERE (the sidecar's machines run Linux). ``confine(pid, confinement)`` puts a started
process in a new Job Object with:

- ``JOB_OBJECT_LIMIT_JOB_MEMORY``: ``sandbox.memory`` for the process and its children together;
- ``JOB_OBJECT_LIMIT_ACTIVE_PROCESS``: ``sandbox.processes``;
- ``JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE``: closing the job's handle (``Job.close``, or the sidecar
  ending in any way) ends every process in it, so nothing of a tool outlives its call or the sidecar;
- ``JOB_OBJECT_LIMIT_DIE_ON_UNHANDLED_EXCEPTION``: no error dialog keeps a crashed tool alive.

The process runs a moment before it is assigned (Python cannot start it suspended), so what it
starts in that moment is outside the job; a worker's first moment is the sidecar's own code.

Everything else is NOT confined on Windows (``NOT_CONFINED``, shown by status): the tool runs with
the user's rights.
"""

from __future__ import annotations

import sys

from .policy import Confinement

NOT_CONFINED = (
    "files: a tool can read and write whatever the user can, not only its chat's workspace "
    "(sandbox.writable is not enforced)",
    "network: a tool can connect anywhere (sandbox.network none and allowedHosts are not enforced)",
    "other processes: a tool can signal, inspect or debug the user's other processes, the sidecar included",
    "disk: the per-call quota is measured after the call, not enforced while it runs",
)


def describe(confinement: Confinement) -> dict[str, object]:
    """What the Job Object enforces for ``confinement``, and what nothing enforces, for status."""
    return {"mechanism": "job-object",
            "confined": {"memory_bytes": confinement.memory_bytes, "max_processes": confinement.max_processes,
                         "kill_on_close": True},
            "not_confined": list(NOT_CONFINED)}


if sys.platform == "win32":  # ctypes.WinDLL exists only there
    import ctypes
    from ctypes import wintypes

    _kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)
    _EXTENDED_LIMIT_INFORMATION = 9
    _LIMIT_ACTIVE_PROCESS = 0x0008
    _LIMIT_JOB_MEMORY = 0x0200
    _LIMIT_DIE_ON_UNHANDLED_EXCEPTION = 0x0400
    _LIMIT_KILL_ON_JOB_CLOSE = 0x2000
    _PROCESS_SET_QUOTA = 0x0100
    _PROCESS_TERMINATE = 0x0001

    class _BasicLimits(ctypes.Structure):
        _fields_ = [("PerProcessUserTimeLimit", ctypes.c_int64), ("PerJobUserTimeLimit", ctypes.c_int64),
                    ("LimitFlags", wintypes.DWORD), ("MinimumWorkingSetSize", ctypes.c_size_t),
                    ("MaximumWorkingSetSize", ctypes.c_size_t), ("ActiveProcessLimit", wintypes.DWORD),
                    ("Affinity", ctypes.c_size_t), ("PriorityClass", wintypes.DWORD),
                    ("SchedulingClass", wintypes.DWORD)]

    class _IoCounters(ctypes.Structure):
        _fields_ = [(name, ctypes.c_ulonglong) for name in (
            "ReadOperationCount", "WriteOperationCount", "OtherOperationCount",
            "ReadTransferCount", "WriteTransferCount", "OtherTransferCount")]

    class _ExtendedLimits(ctypes.Structure):
        _fields_ = [("BasicLimitInformation", _BasicLimits), ("IoInfo", _IoCounters),
                    ("ProcessMemoryLimit", ctypes.c_size_t), ("JobMemoryLimit", ctypes.c_size_t),
                    ("PeakProcessMemoryUsed", ctypes.c_size_t), ("PeakJobMemoryUsed", ctypes.c_size_t)]

    class Job:
        """A Job Object holding one tool process and its children; ``close`` ends them all."""

        def __init__(self, handle: int) -> None:
            self._handle = handle

        def close(self) -> None:
            if self._handle:
                _kernel32.CloseHandle(self._handle)
                self._handle = 0

    def confine(pid: int, confinement: Confinement) -> Job:
        """Put the running process ``pid`` in a new job with ``confinement``'s limits; OSError if Windows refuses."""
        job = _kernel32.CreateJobObjectW(None, None)
        if not job:
            raise ctypes.WinError(ctypes.get_last_error())
        limits = _ExtendedLimits()
        limits.BasicLimitInformation.LimitFlags = (_LIMIT_ACTIVE_PROCESS | _LIMIT_JOB_MEMORY
                                                   | _LIMIT_DIE_ON_UNHANDLED_EXCEPTION | _LIMIT_KILL_ON_JOB_CLOSE)
        limits.BasicLimitInformation.ActiveProcessLimit = confinement.max_processes
        limits.JobMemoryLimit = confinement.memory_bytes
        process = 0
        try:
            if not _kernel32.SetInformationJobObject(job, _EXTENDED_LIMIT_INFORMATION, ctypes.byref(limits),
                                                     ctypes.sizeof(limits)):
                raise ctypes.WinError(ctypes.get_last_error())
            process = _kernel32.OpenProcess(_PROCESS_SET_QUOTA | _PROCESS_TERMINATE, False, pid)
            if not process or not _kernel32.AssignProcessToJobObject(job, process):
                raise ctypes.WinError(ctypes.get_last_error())
        except BaseException:
            _kernel32.CloseHandle(job)
            raise
        finally:
            if process:
                _kernel32.CloseHandle(process)
        return Job(job)

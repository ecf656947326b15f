"""The win32 calls behind ``windows.Job``, through ctypes. Imported only on Windows (``windows.kernel32``)
and by the layout test: the structures are plain ctypes and have the same layout on any 64-bit host,
so tests/sandbox/test_windows.py checks them on Linux against the documented sizes and offsets.

Resuming: subprocess starts the process with CREATE_SUSPENDED when asked, but closes the handle of
its first thread, so ``ResumeThread`` has nothing to call. ``NtResumeProcess`` (ntdll) resumes every
thread of a process from the process handle, which we can open by pid; it is undocumented in the SDK
but exported and unchanged since Windows XP. The documented way round, a Toolhelp32 snapshot to
find the thread then ``OpenThread`` and ``ResumeThread``, walks every thread of the whole system to
find one, on every tool start.
"""

from __future__ import annotations

import ctypes
from typing import Any

from .windows import JobLimits

DWORD = ctypes.c_uint32  # wintypes.DWORD; wintypes itself is for Windows only in older Pythons
HANDLE = ctypes.c_void_p

JOB_OBJECT_BASIC_ACCOUNTING_INFORMATION = 1  # JOBOBJECTINFOCLASS
JOB_OBJECT_EXTENDED_LIMIT_INFORMATION = 9
PROCESS_TERMINATE = 0x0001
PROCESS_SET_QUOTA = 0x0100
PROCESS_SUSPEND_RESUME = 0x0800


class BasicLimits(ctypes.Structure):
    """JOBOBJECT_BASIC_LIMIT_INFORMATION."""

    _fields_ = [("PerProcessUserTimeLimit", ctypes.c_int64), ("PerJobUserTimeLimit", ctypes.c_int64),
                ("LimitFlags", DWORD), ("MinimumWorkingSetSize", ctypes.c_size_t),
                ("MaximumWorkingSetSize", ctypes.c_size_t), ("ActiveProcessLimit", DWORD),
                ("Affinity", ctypes.c_size_t), ("PriorityClass", DWORD), ("SchedulingClass", DWORD)]


class IoCounters(ctypes.Structure):
    """IO_COUNTERS."""

    _fields_ = [(name, ctypes.c_uint64) for name in (
        "ReadOperationCount", "WriteOperationCount", "OtherOperationCount",
        "ReadTransferCount", "WriteTransferCount", "OtherTransferCount")]


class ExtendedLimits(ctypes.Structure):
    """JOBOBJECT_EXTENDED_LIMIT_INFORMATION."""

    _fields_ = [("BasicLimitInformation", BasicLimits), ("IoInfo", IoCounters),
                ("ProcessMemoryLimit", ctypes.c_size_t), ("JobMemoryLimit", ctypes.c_size_t),
                ("PeakProcessMemoryUsed", ctypes.c_size_t), ("PeakJobMemoryUsed", ctypes.c_size_t)]


class BasicAccounting(ctypes.Structure):
    """JOBOBJECT_BASIC_ACCOUNTING_INFORMATION."""

    _fields_ = [("TotalUserTime", ctypes.c_int64), ("TotalKernelTime", ctypes.c_int64),
                ("ThisPeriodTotalUserTime", ctypes.c_int64), ("ThisPeriodTotalKernelTime", ctypes.c_int64),
                ("TotalPageFaultCount", DWORD), ("TotalProcesses", DWORD), ("ActiveProcesses", DWORD),
                ("TotalTerminatedProcesses", DWORD)]


def pack(limits: JobLimits) -> ExtendedLimits:
    """What SetInformationJobObject is given for ``limits``."""
    info = ExtendedLimits()
    info.BasicLimitInformation.LimitFlags = limits.flags
    info.BasicLimitInformation.ActiveProcessLimit = limits.active_processes
    info.JobMemoryLimit = limits.job_memory
    return info


class Kernel32:
    """``windows.JobApi`` made of the real calls."""

    suspended = 0x0000_0004  # CREATE_SUSPENDED

    def __init__(self) -> None:
        win_dll: Any = getattr(ctypes, "WinDLL")  # noqa: B009 - absent off Windows, where pyright reads this
        self._k = k = win_dll("kernel32", use_last_error=True)
        self._nt = win_dll("ntdll")
        # Handles are pointer-sized: the default int return type would cut them to 32 bits.
        k.CreateJobObjectW.restype = HANDLE
        k.CreateJobObjectW.argtypes = (ctypes.c_void_p, ctypes.c_wchar_p)
        k.OpenProcess.restype = HANDLE
        k.OpenProcess.argtypes = (DWORD, ctypes.c_int, DWORD)
        for name in ("SetInformationJobObject", "QueryInformationJobObject", "AssignProcessToJobObject",
                     "TerminateJobObject", "CloseHandle"):
            getattr(k, name).restype = ctypes.c_int
        k.SetInformationJobObject.argtypes = (HANDLE, ctypes.c_int, ctypes.c_void_p, DWORD)
        k.QueryInformationJobObject.argtypes = (HANDLE, ctypes.c_int, ctypes.c_void_p, DWORD, ctypes.c_void_p)
        k.AssignProcessToJobObject.argtypes = (HANDLE, HANDLE)
        k.TerminateJobObject.argtypes = (HANDLE, ctypes.c_uint)
        k.CloseHandle.argtypes = (HANDLE,)
        self._nt.NtResumeProcess.restype = ctypes.c_long
        self._nt.NtResumeProcess.argtypes = (HANDLE,)

    def create(self) -> int:
        job = self._k.CreateJobObjectW(None, None)
        if not job:
            raise self._error("CreateJobObject")
        return int(job)

    def set_limits(self, job: int, limits: JobLimits) -> None:
        info = pack(limits)
        if not self._k.SetInformationJobObject(job, JOB_OBJECT_EXTENDED_LIMIT_INFORMATION, ctypes.byref(info),
                                               ctypes.sizeof(info)):
            raise self._error("SetInformationJobObject")

    def assign(self, job: int, pid: int) -> None:
        process = self._open(pid, PROCESS_SET_QUOTA | PROCESS_TERMINATE)
        try:
            if not self._k.AssignProcessToJobObject(job, process):
                raise self._error("AssignProcessToJobObject")
        finally:
            self._k.CloseHandle(process)

    def resume(self, pid: int) -> None:
        process = self._open(pid, PROCESS_SUSPEND_RESUME)
        try:
            status = self._nt.NtResumeProcess(process)
            if status < 0:  # an NTSTATUS error
                raise OSError(f"NtResumeProcess failed for pid {pid}: NTSTATUS 0x{status & 0xFFFFFFFF:08X}")
        finally:
            self._k.CloseHandle(process)

    def terminate(self, job: int, exit_code: int) -> None:
        if not self._k.TerminateJobObject(job, exit_code):
            raise self._error("TerminateJobObject")

    def active_processes(self, job: int) -> int:
        info = BasicAccounting()
        if not self._k.QueryInformationJobObject(job, JOB_OBJECT_BASIC_ACCOUNTING_INFORMATION, ctypes.byref(info),
                                                 ctypes.sizeof(info), None):
            raise self._error("QueryInformationJobObject")
        return int(info.ActiveProcesses)

    def close(self, job: int) -> None:
        self._k.CloseHandle(job)

    def _open(self, pid: int, access: int) -> int:
        process = self._k.OpenProcess(access, False, pid)
        if not process:
            raise self._error(f"OpenProcess({pid})")
        return int(process)

    def _error(self, call: str) -> OSError:
        code = getattr(ctypes, "get_last_error")()  # noqa: B009 - Windows only, like WinDLL
        format_error: Any = getattr(ctypes, "FormatError")  # noqa: B009 - Windows only, like WinDLL
        return OSError(f"{call} failed: {format_error(code).strip()} (error {code})")

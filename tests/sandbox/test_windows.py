"""Windows' Job Objects, checked where they can be here (Linux): the runner's calls recorded in
order by a stand-in for the win32 calls, around real processes; the ctypes structures against
the documented 64-bit layout; and what status says is not confined. The win32 calls themselves
never ran here."""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sidecar.children import Child
from sidecar.sandbox import detect, runner, win32job, windows
from sidecar.sandbox.policy import Confinement
from sidecar.sandbox.runner import Sandbox
from sidecar.sandbox.windows import CREATE_SUSPENDED, JobLimits
from sidecar.tools.providers.builtin import BuiltinCall, BuiltinError
from sidecar.tools.providers.builtin.shell import run_command
from sidecar.tools.providers.python.workers import Limits, ToolsetWorkers
from tests.mcp_host.test_host import FIXTURES, running, stdio, text, wait_status
from tests.procs import wait_gone
from tests.tools.providers.python.test_workers import call, make_toolset

pytestmark = pytest.mark.anyio

LIMITED = Confinement(memory_bytes=300 << 20, max_processes=12)
FLAGS = (windows.LIMIT_ACTIVE_PROCESS | windows.LIMIT_JOB_MEMORY | windows.LIMIT_DIE_ON_UNHANDLED_EXCEPTION
         | windows.LIMIT_KILL_ON_JOB_CLOSE)


class Recorder:
    """``windows.JobApi`` writing down each call. Linux has no Job Objects: a job's processes are
    the process group of the one assigned to it (each child starts a session of its own), so
    terminating it kills the group, as TerminateJobObject would end the job."""

    suspended = CREATE_SUSPENDED

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.members: dict[int, int] = {}  # job -> the pid assigned to it
        self.fail: set[str] = set()
        self._next = 100

    def names(self) -> list[str]:
        return [c[0] for c in self.calls]

    def _record(self, *entry: Any) -> None:
        self.calls.append(entry)
        if entry[0] in self.fail:
            raise OSError(f"{entry[0]} failed (as told)")

    def create(self) -> int:
        self._next += 4
        self._record("create", self._next)
        return self._next

    def set_limits(self, job: int, limits: JobLimits) -> None:
        self._record("set_limits", job, limits)

    def assign(self, job: int, pid: int) -> None:
        self._record("assign", job, pid)
        self.members[job] = pid

    def resume(self, pid: int) -> None:
        self._record("resume", pid)

    def terminate(self, job: int, exit_code: int) -> None:
        self._record("terminate", job, exit_code)
        try:
            os.killpg(self.members[job], signal.SIGKILL)
        except ProcessLookupError:
            pass

    def active_processes(self, job: int) -> int:
        try:
            os.killpg(self.members[job], 0)
        except ProcessLookupError:
            return 0
        return 1

    def close(self, job: int) -> None:
        self._record("close", job)


@pytest.fixture
def jobs(monkeypatch: pytest.MonkeyPatch) -> Iterator[Recorder]:
    recorder = Recorder()
    real_spawn = runner.spawn

    async def spawn(argv: list[str], **options: Any) -> Child:
        # Linux's Popen refuses creationflags: note them, start the process as it is.
        recorder.calls.append(("spawn", options.pop("creationflags", 0)))
        child = await real_spawn(argv, **options)
        recorder.calls[-1] += (child.pid,)
        return child

    monkeypatch.setattr(runner, "spawn", spawn)
    yield recorder


def shell_call(tmp_path: Path, jobs: Recorder, command: str, timeout: float = 20) -> BuiltinCall:
    return BuiltinCall(tmp_path, {"command": command}, timeout, confinement=LIMITED,
                       sandbox=Sandbox("none", jobs=jobs))


async def test_a_command_is_in_its_job_with_its_limits_before_it_runs(jobs: Recorder, tmp_path: Path) -> None:
    result = await run_command(shell_call(tmp_path, jobs, "echo from the job"))
    assert result["exit_code"] == 0 and result["output"] == "from the job\n"
    (_, job), limits, (_, flags, pid), assign, resume, close = jobs.calls
    # Limits before anything is in the job; started suspended; assigned, then resumed; closed at the end.
    assert limits == ("set_limits", job, JobLimits(flags=FLAGS, active_processes=12, job_memory=300 << 20))
    assert flags & CREATE_SUSPENDED
    assert assign == ("assign", job, pid) and resume == ("resume", pid) and close == ("close", job)


async def test_a_timeout_terminates_the_job_then_closes_it(jobs: Recorder, tmp_path: Path) -> None:
    marker = tmp_path / "sleeper"
    with pytest.raises(BuiltinError) as info:
        await run_command(shell_call(tmp_path, jobs, f"sleep 60 & echo $! > {marker}; wait", timeout=0.5))
    assert info.value.kind == "timeout"
    names = jobs.names()
    assert names[:5] == ["create", "set_limits", "spawn", "assign", "resume"]
    assert "terminate" in names and names[-1] == "close" and names.index("terminate") < names.index("close")
    assert await wait_gone(int(marker.read_text()))  # the shell's child went with the job


async def test_what_a_command_leaves_running_ends_with_its_job(jobs: Recorder, tmp_path: Path) -> None:
    marker = tmp_path / "left"
    result = await run_command(shell_call(tmp_path, jobs, f"sleep 60 > /dev/null 2>&1 & echo $! > {marker}"))
    assert result["exit_code"] == 0
    assert jobs.names()[-2:] == ["terminate", "close"]
    assert await wait_gone(int(marker.read_text()))


async def test_a_process_windows_will_not_put_in_a_job_never_runs(jobs: Recorder, tmp_path: Path) -> None:
    jobs.fail.add("assign")
    with pytest.raises(OSError, match="assign failed"):
        await run_command(shell_call(tmp_path, jobs, f"touch {tmp_path / 'ran'}"))
    assert jobs.names() == ["create", "set_limits", "spawn", "assign", "close"]  # never resumed
    assert await wait_gone(jobs.calls[2][2])


async def test_limits_windows_refuses_start_nothing(jobs: Recorder, tmp_path: Path) -> None:
    jobs.fail.add("set_limits")
    with pytest.raises(OSError, match="set_limits failed"):
        await run_command(shell_call(tmp_path, jobs, "true"))
    assert jobs.names() == ["create", "set_limits", "close"]


async def test_a_python_worker_runs_in_its_job_until_the_pool_stops_it(jobs: Recorder, tmp_path: Path) -> None:
    toolset = make_toolset(tmp_path / "toolset", {"demo.py": '''
        from covalt_toolset import tool

        @tool
        def word_count(text: str) -> int:
            return len(text.split())
    '''})
    ws = tmp_path / "ws"
    ws.mkdir()
    pool = ToolsetWorkers("demo", toolset, Limits(), sandbox=Sandbox("none", jobs=jobs))
    try:
        assert await call(pool, ws, "word_count", {"text": "one two three"}, confinement=LIMITED) == 3
        assert await call(pool, ws, "word_count", {"text": "warm"}, confinement=LIMITED) == 1
        (_, job), limits, (_, flags, pid), assign, resume = jobs.calls  # one worker, one job, held
        assert limits[2] == JobLimits(flags=FLAGS, active_processes=12, job_memory=300 << 20)
        assert flags & CREATE_SUSPENDED and assign == ("assign", job, pid) and resume == ("resume", pid)
    finally:
        await pool.aclose()
    assert jobs.calls[-1] == ("close", job)
    assert await wait_gone(pid)


async def test_an_opted_in_mcp_server_runs_in_its_job_until_it_is_stopped(jobs: Recorder) -> None:
    confined = stdio("boxed", cwd=str(FIXTURES), sandbox=Confinement(network="full", max_processes=5))
    async with running(confined, sandbox=Sandbox("none", jobs=jobs)) as (host, _):
        await wait_status(host, "ts~boxed", "connected")
        assert text(await host.call_tool("ts~boxed", "echo", {"text": "in a job"})) == "in a job"
        (_, job), limits, (_, flags, pid), assign, resume = jobs.calls
        assert limits[2].active_processes == 5 and flags & CREATE_SUSPENDED
        assert assign == ("assign", job, pid) and resume == ("resume", pid)
    assert jobs.calls[-1] == ("close", job)
    assert await wait_gone(pid)


async def test_status_says_job_object_limits_and_what_is_not_confined() -> None:
    assert await Sandbox("none", jobs=Recorder()).limits() == "job-object"
    found = detect._probe("auto", platform="win32")  # noqa: SLF001 - the probe's Windows branch, run on Linux
    assert found.mechanism == "none" and not found.confined and found.warning is not None
    for what in ("Job Object", "memory and processes", "files:", "sandbox.writable", "network:",
                 "sandbox.network", "other processes:", "the sidecar included"):
        assert what in found.warning
    off = detect._probe("none", platform="win32")  # noqa: SLF001 - as above
    assert off.warning is not None and "Job Object limits only" in off.warning


@pytest.mark.skipif(ctypes.sizeof(ctypes.c_void_p) != 8, reason="the documented layout checked is the 64-bit one")
def test_the_structures_have_the_documented_64_bit_layout() -> None:
    # winnt.h on x64: JOBOBJECT_BASIC_LIMIT_INFORMATION is 64 bytes, IO_COUNTERS 48,
    # JOBOBJECT_EXTENDED_LIMIT_INFORMATION 144, JOBOBJECT_BASIC_ACCOUNTING_INFORMATION 48.
    basic = win32job.BasicLimits
    offsets = {name: getattr(basic, name).offset for name, *_ in basic._fields_}  # noqa: SLF001 - ctypes' own
    assert offsets == {"PerProcessUserTimeLimit": 0, "PerJobUserTimeLimit": 8, "LimitFlags": 16,
                       "MinimumWorkingSetSize": 24, "MaximumWorkingSetSize": 32, "ActiveProcessLimit": 40,
                       "Affinity": 48, "PriorityClass": 56, "SchedulingClass": 60}
    assert ctypes.sizeof(basic) == 64 and ctypes.sizeof(win32job.IoCounters) == 48
    ext = win32job.ExtendedLimits
    assert (ext.IoInfo.offset, ext.ProcessMemoryLimit.offset, ext.JobMemoryLimit.offset,
            ext.PeakProcessMemoryUsed.offset, ext.PeakJobMemoryUsed.offset) == (64, 112, 120, 128, 136)
    assert ctypes.sizeof(ext) == 144
    acct = win32job.BasicAccounting
    assert (acct.ActiveProcesses.offset, ctypes.sizeof(acct)) == (40, 48)


def test_the_limits_are_packed_where_windows_reads_them() -> None:
    packed = win32job.pack(windows.limits_for(LIMITED))
    raw = bytes(packed)
    assert int.from_bytes(raw[16:20], sys.byteorder) == FLAGS == 0x2608
    assert int.from_bytes(raw[40:44], sys.byteorder) == 12
    assert int.from_bytes(raw[120:128], sys.byteorder) == 300 << 20
    assert not any(raw[112:120]) and not any(raw[0:16])  # no per-process memory or CPU time limit


def test_the_real_calls_exist_only_on_windows() -> None:
    if sys.platform == "win32":
        pytest.skip("this checks the other platforms")
    with pytest.raises(AttributeError):  # ctypes.WinDLL
        windows.kernel32()
    assert Sandbox("none").jobs() is None

"""Cgroup v2 for real, where a machine binds memory and pids to v1 (this one): a fresh cgroup2
mount has no controllers, but its core files (cgroup.procs, cgroup.kill, cgroup.events) are real.
What sandbox/cgroups.py does with v2 that needs no controller runs against them: the probe's
fallback, a worker's group, moving processes in, killing the whole group, its removal, and a
worker whose group has no limit files (its calls run, on rlimits)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from sidecar.sandbox import cgroups
from sidecar.sandbox.runner import Sandbox
from sidecar.tools.providers.python import workers
from sidecar.tools.providers.python.workers import Limits, ToolsetWorkers
from tests.timing import scaled

pytestmark = pytest.mark.anyio


@pytest.fixture
def v2_base() -> Iterator[Path]:
    """A folder of its own in a real cgroup2 hierarchy, mounted for the test and unmounted after."""
    if os.geteuid() != 0:
        pytest.skip("mounting a cgroup2 hierarchy needs root")
    mount = Path(tempfile.mkdtemp(prefix="covalt-cgroup2-", dir="/var/tmp"))
    done = subprocess.run(["mount", "-t", "cgroup2", "none", str(mount)], capture_output=True, text=True)
    if done.returncode != 0:
        mount.rmdir()
        pytest.skip(f"cannot mount cgroup2: {done.stderr.strip()}")
    base = mount / f"covalt-test-{uuid.uuid4().hex[:8]}"
    try:
        base.mkdir()
        yield base
    finally:
        for folder in sorted(base.rglob("*"), key=lambda p: -len(p.parts)) if base.exists() else ():
            if folder.is_dir():
                cgroups._kill_and_remove([folder])
        cgroups._kill_and_remove([base])
        subprocess.run(["umount", str(mount)], check=False)
        mount.rmdir()


def subgroups(base: Path) -> list[Path]:
    return [p for p in base.iterdir() if p.is_dir()]


def controllers(base: Path) -> set[str]:
    return set((base.parent / "cgroup.controllers").read_text().split())


def cgroup_of(pid: int) -> str:
    return next(line for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines() if line.startswith("0::"))


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def test_real_v2_without_memory_and_pids_falls_back_to_rlimits_and_says_why(
        v2_base: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    if {"memory", "pids"} <= controllers(v2_base):
        pytest.skip("this machine offers the controllers on v2: the probe would move this process")
    me = tmp_path / "self"
    me.write_text(f"0::/{v2_base.name}\n")
    with caplog.at_level(logging.INFO, logger="sidecar.sandbox"):
        found = cgroups.probe(v2_base.parent, me)
    assert (found.kind, found.bases) == ("rlimit", {})
    assert "no memory and pids controllers" in caplog.text and str(v2_base) in caplog.text
    assert not subgroups(v2_base)  # nothing created, no process moved


def test_a_worker_group_holds_what_its_processes_start_and_dies_whole(
        v2_base: Path, caplog: pytest.LogCaptureFixture) -> None:
    group = cgroups.Cgroups("cgroup-v2", 2, {"unified": v2_base}).create()
    assert group is not None and group.dirs["unified"].is_dir()
    folder = group.dirs["unified"]
    with caplog.at_level(logging.WARNING, logger="sidecar.sandbox"):
        group.set_limits(64, 256 << 20)
    assert group.limited is False and group.fixed is False
    assert "no pids.max" in caplog.text and "rlimits" in caplog.text
    assert group.config()["limited"] is False

    # A process that forks for as long as it lives: moved in, it and everything it starts is in the group.
    breeder = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        import os, time
        while True:
            if os.fork() == 0:
                time.sleep(60)
                os._exit(0)
            time.sleep(0.01)
    """)])
    try:
        (folder / "cgroup.procs").write_text(str(breeder.pid))
        # Its children appear as it forks them (slowly while coverage traces it): wait for a few.
        deadline = time.monotonic() + scaled(10)
        inside = [int(p) for p in (folder / "cgroup.procs").read_text().split()]
        while len(inside) <= 3 and breeder.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
            inside = [int(p) for p in (folder / "cgroup.procs").read_text().split()]
        assert breeder.pid in inside and len(inside) > 3
        assert cgroup_of(breeder.pid).endswith(f"/{v2_base.name}/{folder.name}")
        assert "populated 1" in (folder / "cgroup.events").read_text()

        group.remove()  # cgroup.kill: every process at once, the breeder's newest child too
        assert breeder.wait(timeout=scaled(5)) == -9
        deadline = time.monotonic() + scaled(5)
        while any(alive(pid) for pid in inside) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not [pid for pid in inside if alive(pid)]
        assert not folder.exists()
    finally:
        breeder.kill()
        breeder.wait()


FETCH_CGROUP = '''
import os, resource
from covalt_toolset import tool

@tool
def where() -> dict:
    """This call's cgroup and memory rlimit."""
    line = next(l for l in open("/proc/self/cgroup").read().splitlines() if l.startswith("0::"))
    return {"cgroup": line, "data": resource.getrlimit(resource.RLIMIT_DATA)[0]}
'''


@pytest.mark.parametrize("mechanism", ["bubblewrap", "none"])
async def test_a_worker_whose_group_has_no_limit_files_runs_its_calls_in_it_on_rlimits(
        v2_base: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mechanism: str) -> None:
    if mechanism == "bubblewrap" and Sandbox("bubblewrap").detected().mechanism != "bubblewrap":
        pytest.skip("bubblewrap cannot run here")
    monkeypatch.setattr(workers.cgroups, "detect", lambda: cgroups.Cgroups("cgroup-v2", 2, {"unified": v2_base}))
    folder = tmp_path / "where"
    (folder / "tools").mkdir(parents=True)
    (folder / "tools" / "probe.py").write_text(FETCH_CGROUP)
    ws = tmp_path / "ws"
    ws.mkdir()
    pool = ToolsetWorkers("where", folder, Limits(), sandbox=Sandbox(mechanism))
    try:
        got = await pool.call("where", "tools.probe:where", {}, context={"workspace": str(ws), "chatId": "c"})
        groups = subgroups(v2_base)
        assert len(groups) == 1 and got["cgroup"].endswith(f"/{groups[0].name}")
        assert got["data"] == 256 << 20  # the call's memory limit, as an rlimit
        stderr = pool._idle[0].child.stderr_text()
        assert "cannot write" not in stderr, stderr  # the worker did not try the missing files
    finally:
        await pool.aclose()
    assert not subgroups(v2_base)  # the group went with its worker

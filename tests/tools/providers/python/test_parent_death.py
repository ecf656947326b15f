"""Where spawn cannot arm the parent-death signal (no setpriv), a worker arms it itself."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from sidecar import children
from sidecar.tools.providers.python import workers

WORKER_PROGRAM = workers.WORKER_PROGRAM

# A parent that starts a child which arms the signal the way a worker does, reports the
# child's pid, then waits to be killed.
PARENT = f"""
import subprocess, sys, os, time
child = subprocess.Popen([sys.executable, "-c", '''
import os, sys, time
sys.path.insert(0, {str(WORKER_PROGRAM)!r})
from covalt_worker.procs import die_with_parent
die_with_parent(os.getppid())
print("armed", flush=True)
time.sleep(60)
'''], stdout=subprocess.PIPE)
assert child.stdout.readline().strip() == b"armed"
print(child.pid, flush=True)
time.sleep(60)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
def test_a_worker_that_armed_itself_dies_with_a_parent_killed_by_sigkill():
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE)
    child_pid = 0
    try:
        assert parent.stdout is not None
        child_pid = int(parent.stdout.readline())
        assert _alive(child_pid)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(10)
        deadline = time.monotonic() + 5
        while _alive(child_pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not _alive(child_pid), "the worker outlived its killed parent"
    finally:
        parent.kill()
        if child_pid and _alive(child_pid):
            os.kill(child_pid, signal.SIGKILL)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
def test_spawn_arms_it_with_setpriv_and_says_when_it_cannot(monkeypatch: pytest.MonkeyPatch):
    children._pdeathsig_wrapper.cache_clear()
    try:
        assert children.dies_with_sidecar() is (children.shutil.which("setpriv") is not None)
        children._pdeathsig_wrapper.cache_clear()
        with monkeypatch.context() as m:
            m.setattr(children.shutil, "which", lambda name: None)
            assert children.dies_with_sidecar() is False  # then workers get parentPid and arm it themselves
    finally:
        children._pdeathsig_wrapper.cache_clear()

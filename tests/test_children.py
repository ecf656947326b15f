"""sidecar/children.py with real processes: the stop ladder, the stderr tail, the exit wording."""

from __future__ import annotations

import os
import signal
import sys

import anyio
import pytest

from sidecar.children import DEVNULL, exit_reason, spawn
from tests.procs import gone, wait_gone
from tests.timing import scaled

pytestmark = pytest.mark.anyio

STUBBORN = """
import signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], stdin=subprocess.DEVNULL)
for n in range(30):
    print(f"line {n}", file=sys.stderr, flush=True)
print(child.pid, flush=True)
time.sleep(300)
"""


def test_exit_wording() -> None:
    assert exit_reason(0) == "exited with code 0"
    assert exit_reason(3) == "exited with code 3"
    assert exit_reason(None) == "is still running"
    assert exit_reason(-signal.SIGSEGV) == "was killed by SIGSEGV (a crash in native code)"
    assert exit_reason(-signal.SIGTERM) == "was killed by SIGTERM"
    assert exit_reason(-50) == "was killed by signal 50"


async def test_the_ladder_ends_a_child_that_ignores_stdin_and_sigterm_and_what_it_started() -> None:
    child = await spawn([sys.executable, "-c", STUBBORN], env=dict(os.environ), label="stubborn", stderr_lines=5)
    line = b""
    with anyio.fail_after(scaled(20)):
        while not line.endswith(b"\n"):
            line += await child.stdout.receive()
    grandchild = int(line)
    assert os.getpgid(grandchild) == child.pid  # the child leads a group of its own
    await child.stop(stdin_grace=0.1, term_grace=0.2)
    assert exit_reason(child.returncode) == "was killed by SIGKILL (perhaps by the system, for using too much memory)"
    assert gone(child.pid) and await wait_gone(grandchild)
    assert child.stderr is not None and await child.stderr.settle(5)
    assert child.stderr_text() == "\n".join(f"line {n}" for n in range(25, 30))
    await child.stop(stdin_grace=1, term_grace=1)  # idempotent


async def test_a_command_that_does_not_exist_fails_to_start() -> None:
    with pytest.raises(FileNotFoundError):
        await spawn(["covalt-no-such-command"], env=dict(os.environ), label="missing", stdin=DEVNULL)

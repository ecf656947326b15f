"""The README's first command: the demo runs a whole session to a clean exit."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_demo_runs_a_whole_session_and_stops_cleanly(tmp_path: Path):
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "demo.py"), "--data-dir", str(tmp_path / "data")],
                          capture_output=True, text=True, timeout=180, cwd=ROOT)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    for seen in ("chat/send answered     stopReason endTurn", "tools/list {chatId}", "still serving          {}",
                 "toolCalls/export", "most used", "tools/list {pageSize: 4}",
                 "its echo tool          a secret says hello to the world",
                 "its tool call: tools_off", "a turn ran", "exit code              0"):
        assert seen in out, out[-3000:]

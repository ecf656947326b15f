"""Runs the Node client tests (tests/node): the sidecar driven by vscode-jsonrpc over NDJSON stdio,
the way the Electron main process drives it, plus a strict compile of the generated protocol/ts."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

NODE_DIR = Path(__file__).resolve().parents[1] / "node"
NEEDED = ("vscode-jsonrpc", "typescript")


@pytest.mark.node
def test_node_client() -> None:
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is not on PATH: install Node.js (20+) to run tests/node")
    modules = NODE_DIR / "node_modules"
    missing = [name for name in NEEDED if not (modules / name / "package.json").is_file()]
    if missing:
        pytest.fail(
            f"{modules} lacks {', '.join(missing)}: run scripts/test, which installs it "
            f"(npm ci --prefix tests/node)"
        )
    env = dict(os.environ)
    # The sidecar runs under the interpreter running pytest unless the caller chose another.
    env.setdefault("SIDECAR_PYTHON", sys.executable)
    try:
        run = subprocess.run(
            [node, "--test"],
            cwd=NODE_DIR,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
        )
    except subprocess.TimeoutExpired as exc:
        # TimeoutExpired carries bytes even with text=True.
        out, err = (
            (b if isinstance(b, str) else (b or b"").decode("utf-8", "replace"))
            for b in (exc.stdout, exc.stderr)
        )
        pytest.fail(f"node --test took longer than 120 s\n--- stdout ---\n{out}\n--- stderr ---\n{err}")
    assert run.returncode == 0, (
        f"node --test exited with {run.returncode}\n--- stdout ---\n{run.stdout}\n"
        f"--- stderr ---\n{run.stderr}"
    )

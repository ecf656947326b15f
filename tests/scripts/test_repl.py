"""scripts/repl end to end: piped lines against a real sidecar."""

from __future__ import annotations

import os
import subprocess

from tests.scripts.conftest import ROOT


def run_repl(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_COLOR": "1"}
    return subprocess.run([str(ROOT / "scripts" / "repl"), *args], input=script, text=True,
                          capture_output=True, timeout=60, env=env, cwd=ROOT)


def test_repl_runs_piped_commands():
    done = run_repl("ping\ndebug/info\n")
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "← #2 ping {}" in out
    info = out[out.index("← #3 debug/info"):]
    assert '"pid":' in info and '"version":' in info
    assert "sidecar exited with code 0" in out


def test_repl_script_answers_server_requests_and_reports_bad_input():
    script = "\n".join([
        "debug/roundTrip method=ui/confirm params.q=1",
        ":answer s1 ok=true",
        'debug/sleep {"ms" 5}',
        ":raw this is not json",
        "nope/method",
        "",
    ])
    done = run_repl(script)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert '⇠ server request s1 ui/confirm {"q": 1}' in out
    assert '"result": {"ok": true}' in out
    assert "bad JSON params: Expecting ':' delimiter" in out
    assert "answer to id null: error -32700 ParseError" in out
    assert "error -32601 MethodNotFound" in out
    # in order: each line's answer comes before the next line runs
    assert out.index('"result": {"ok": true}') < out.index("> debug/sleep")

"""The command a confined tool process is started with, per mechanism."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from sidecar.sandbox import runner
from sidecar.sandbox.detect import Detected
from sidecar.sandbox.policy import DEFAULT, Confinement
from sidecar.sandbox.runner import Sandbox

pytestmark = pytest.mark.anyio


def found(mechanism: str, **kw: object) -> object:
    async def probe(choice: str, record: object = None) -> Detected:
        return Detected(mechanism=mechanism, **kw)  # type: ignore[arg-type]  # the mechanism under test
    return probe


async def test_bubblewrap_binds_the_workspace_and_homes_the_tool_in_its_tmp(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(runner, "probe", found("bubblewrap", bwrap="/usr/bin/bwrap"))
    ws = str(tmp_path)
    jail = await Sandbox().prepare([sys.executable, "-c", "pass"], env={"HOME": "/home/ada"}, cwd=ws,
                                   workspace=ws, read_only=["/opt/toolset"])
    try:
        assert jail.argv[0] == "/usr/bin/bwrap" and jail.argv[-3:] == [sys.executable, "-c", "pass"]
        assert ["--bind", ws, ws] == jail.argv[jail.argv.index(ws) - 1:jail.argv.index(ws) + 2]
        assert jail.env["HOME"] == "/tmp/home" and jail.info_fd is not None and jail.pass_fds
    finally:
        jail.started(None)
    assert jail.info_fd is None and not jail.pass_fds


async def test_seatbelt_runs_the_program_under_sandbox_exec_with_paths_as_parameters(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The profile's text is seatbelt.py's (its own tests); here: that the runner uses it. Untested on a Mac.
    monkeypatch.setattr(runner, "probe", found("seatbelt"))
    jail = await Sandbox().prepare(["/bin/sh", "-c", "true"], env={}, cwd="/ws", workspace="/ws",
                                   confinement=Confinement(network="allowedHosts", allowed_hosts=("a.example",)))
    assert jail.argv[:2] == ["/usr/bin/sandbox-exec", "-p"] and jail.argv[-3:] == ["/bin/sh", "-c", "true"]
    assert "WRITE_0=/ws" in jail.argv
    assert "network-outbound" not in jail.argv[2]  # no proxy here: allowedHosts falls back to no network


async def test_none_runs_the_program_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner, "probe", found("none", warning="unconfined"))
    jail = await Sandbox("none").prepare(["/bin/true"], env={"A": "1"}, cwd="/", workspace="/ws",
                                         confinement=DEFAULT)
    assert jail.argv == ["/bin/true"] and jail.env == {"A": "1"} and jail.mechanism == "none"

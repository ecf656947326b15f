"""The kill switch through the real ``python -m sidecar``: it survives a restart, and switching
it off stops a Python tool running in its worker process."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest

from sidecar.client import RemoteError, SidecarClient
from tests.procs import host_pid
from tests.timing import scaled

pytestmark = pytest.mark.anyio

MANIFEST = """manifest_version: "1"
id: slow
name: Slow
version: "1.0.0"
tools:
  - id: nap
    entrypoint: tools.nap:nap
    timeout: 120
"""

NAP = '''
import os, time
from covalt_toolset import get_context, tool

@tool
def nap(seconds: float) -> dict:
    """Says which process it runs in, then sleeps."""
    (get_context().workspace / "pid.txt").write_text(f"{os.readlink('/proc/self/ns/pid')} {os.getpid()}")
    time.sleep(seconds)
    return {"slept": seconds}
'''


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


async def test_tools_off_survives_a_restart_and_is_reported_at_initialize(data_dir: Path):
    async with SidecarClient.spawn(data_dir, initialize=False) as sc:
        first = await sc.request("initialize", {"clientInfo": {"name": "t", "version": "1"}})
        assert first["capabilities"]["toolsEnabled"] is True
        await sc.request("settings/set", {"toolsEnabled": False})
    async with SidecarClient.spawn(data_dir, initialize=False) as sc:
        again = await sc.request("initialize", {"clientInfo": {"name": "t", "version": "1"}})
        assert again["capabilities"]["toolsEnabled"] is False
        assert (await sc.request("settings/get"))["settings"]["toolsEnabled"] is False
        assert (await sc.request("debug/info"))["toolsEnabled"] is False
        with pytest.raises(RemoteError) as info:
            await sc.request("tools/call", {"toolId": "echo", "args": {}})
        assert info.value.code == -32012 and info.value.data == {"reason": "toolsOff"}
        await sc.request("settings/set", {"toolsEnabled": True})
    async with SidecarClient.spawn(data_dir) as sc:
        assert (await sc.request("settings/get"))["settings"]["toolsEnabled"] is True


async def test_switching_off_stops_a_python_tool_in_its_worker(data_dir: Path, tmp_path: Path):
    folder = tmp_path / "slow"
    (folder / "tools").mkdir(parents=True)
    (folder / "toolset.yaml").write_text(MANIFEST)
    (folder / "tools" / "nap.py").write_text(NAP)
    async with SidecarClient.spawn(data_dir) as sc:
        await sc.request("toolsets/import", {"path": str(folder)})
        chat = (await sc.request("chats/create", {"title": "t"}))["chat"]
        answer = sc.expect("nap")
        await sc.send({"jsonrpc": "2.0", "id": "nap", "method": "tools/call",
                       "params": {"toolId": "slow:nap", "args": {"seconds": 60}, "chatId": chat["id"]}})
        pid_file = Path(chat["workspacePath"]) / "pid.txt"
        with anyio.fail_after(scaled(20)):
            while not pid_file.exists() or not pid_file.read_text():
                await anyio.sleep(0.02)
        worker = host_pid(pid_file.read_text())  # the tool names itself in its sandbox's pid namespace
        assert worker is not None
        await sc.request("settings/set", {"toolsEnabled": False})
        with anyio.fail_after(10):  # not the 60 s of the nap
            call = (await answer(10))["result"]["toolCall"]
        assert call["status"] == "error" and call["errorKind"] == "killed"
        with anyio.fail_after(scaled(5)):
            while not gone(worker):
                await anyio.sleep(0.02)
        # What the tool wrote before it was stopped is kept as the version after the call.
        kept = await sc.request("workspace/files", {"chatId": chat["id"], "manifestId": call["postManifestId"]})
        assert [f["path"] for f in kept["files"]] == ["pid.txt"]
        assert await sc.request("ping") == {}

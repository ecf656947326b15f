"""The sidecar's children and leftovers when it dies without warning (kill -9), through the real process."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
import pytest

from sidecar.client import SidecarClient
from tests.procs import alive, host_pid, wait_gone
from tests.timing import scaled

pytestmark = pytest.mark.anyio

MCP_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "mcp"

MANIFEST = """manifest_version: "1"
id: sleepy
name: Sleepy
version: "1.0.0"
tools:
  - id: nap
    entrypoint: tools.sleepy:nap
"""

SLEEPY_PY = '''
import os, time
from pathlib import Path
from covalt_toolset import get_context, tool

@tool
def nap() -> None:
    # In its own pid namespace: the name host_pid finds it by
    (get_context().workspace / "worker.pid").write_text(f"{os.readlink('/proc/self/ns/pid')} {os.getppid()}")
    time.sleep(600)
'''


def children_of(pid: int) -> dict[int, str]:
    """The live child processes of ``pid`` with their command lines."""
    found: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid and alive(int(entry)):
            found[int(entry)] = cmdline
    return found


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
async def test_children_die_with_a_sidecar_killed_without_warning(data_dir: Path, tmp_path: Path):
    folder = tmp_path / "sleepy"
    (folder / "tools").mkdir(parents=True)
    (folder / "toolset.yaml").write_text(MANIFEST)
    (folder / "tools" / "sleepy.py").write_text(SLEEPY_PY)
    async with SidecarClient.spawn(data_dir) as sidecar:
        await sidecar.request("toolsets/import", {"path": str(folder)})
        # Neither child would notice its stdin closing: the worker is busy in a tool, and this
        # MCP server never reads stdin.
        await sidecar.request("mcpServers/add", {"id": "deaf", "command": sys.executable,
                                                 "args": [str(MCP_FIXTURES / "hangs.py")]})
        await sidecar.send({"jsonrpc": "2.0", "id": "nap", "method": "tools/call",
                            "params": {"toolId": "sleepy:nap", "args": {}}})
        with anyio.fail_after(scaled(20)):
            while True:
                # the call's scratch folder (in its toolset's root), the only place the tool writes
                markers = [m for m in data_dir.glob("scratch/*/*/worker.pid") if m.read_text()]
                if markers and any("hangs.py" in c for c in children_of(sidecar.proc.pid).values()):
                    break
                await anyio.sleep(0.02)
        worker = host_pid(markers[0].read_text())
        [server] = [pid for pid, cmd in children_of(sidecar.proc.pid).items() if "hangs.py" in cmd]
        assert worker is not None and worker != sidecar.proc.pid

        sidecar.proc.kill()  # SIGKILL: no code of the sidecar runs
        await sidecar.proc.wait()

        assert await wait_gone(worker, timeout=2), "the toolset worker outlived the sidecar"
        assert await wait_gone(server, timeout=2), "the MCP server outlived the sidecar"


async def test_temporary_files_a_crash_left_are_removed_at_the_next_start(data_dir: Path):
    async with SidecarClient.spawn(data_dir) as sidecar:
        chat_id = (await sidecar.request("chats/create", {"title": "t"}))["chat"]["id"]
        await sidecar.request("workspace/writeFile", {"chatId": chat_id, "path": "a.txt", "text": "kept"})
        sidecar.proc.kill()
        await sidecar.proc.wait()
    chat = data_dir / "chats" / chat_id
    half_blob = chat / "blobs" / "tmp" / "tmpab12cd"
    half_blob.parent.mkdir(parents=True, exist_ok=True)
    half_blob.write_bytes(b"half a blob")
    half_cache = chat / "statcache.tmp"
    half_cache.write_bytes(b"half a cache")
    scratch = data_dir / "scratch" / "sleepy" / "call-x1y2"
    scratch.mkdir(parents=True)
    (scratch / "out.csv").write_text("a tool's output")
    blobs_before = sorted(p.name for p in (chat / "blobs").rglob("*") if p.is_file())

    async with SidecarClient.spawn(data_dir) as sidecar:
        with anyio.fail_after(scaled(10)):
            while True:
                if not (half_blob.exists() or half_cache.exists() or scratch.exists()):
                    break
                await anyio.sleep(0.02)
        read = await sidecar.request("workspace/readFile", {"chatId": chat_id, "path": "a.txt"})
        assert read["text"] == "kept"
    assert sorted(p.name for p in (chat / "blobs").rglob("*") if p.is_file()) == \
        [n for n in blobs_before if n != half_blob.name]

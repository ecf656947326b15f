"""The mcp SDK (over a second of imports on these machines) stays off the sidecar's start-up path:
``initialize`` is answered, pings and the services are served, and a configured stdio server's
process is already started, all while the SDK's import is held back (issue 29, "Figures").

The sidecar runs as ``python -m sidecar`` would, in a subprocess whose first act is to put a gate
in front of every import of ``mcp`` or ``mcp_types``: the thread that asks for either first blocks
until the test opens the gate. Had the import moved onto the event loop, into ``initialize``'s
path or in front of a server's start, the step that waits for it here would never come; and the
server connecting once the gate opens shows the gate really was where the SDK was loaded.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
import pytest

from sidecar.client import SidecarClient
from tests.timing import scaled

pytestmark = pytest.mark.anyio

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "mcp"

# argv: the gate's folder, then the sidecar's own arguments. "asked" names the first module held
# back; one byte written to the "open" FIFO lets every import through.
GATED_SIDECAR = r"""
import os, runpy, sys, threading
gate = sys.argv[1]
opened = threading.Event()
held = threading.Lock()

class Gate:
    def find_spec(self, name, path=None, target=None):
        if not opened.is_set() and name.partition(".")[0] in ("mcp", "mcp_types"):
            with held:
                if not opened.is_set():
                    with open(os.path.join(gate, "asking"), "w") as f:
                        f.write(f"{name} {threading.current_thread() is threading.main_thread()}")
                    os.replace(os.path.join(gate, "asking"), os.path.join(gate, "asked"))
                    with open(os.path.join(gate, "open"), "rb") as f:
                        f.read(1)
                    opened.set()
        return None

sys.meta_path.insert(0, Gate())
sys.argv = ["sidecar", *sys.argv[2:]]
runpy.run_module("sidecar", run_name="__main__", alter_sys=True)
"""


def statuses(client: SidecarClient, key: str) -> list[str]:
    return [n["params"]["server"]["status"] for n in client.notifications
            if n["method"] == "mcpServers/status" and n["params"]["server"]["id"] == key]


async def wait_path(path: Path, deadline: float, what: str) -> None:
    """Until ``path`` exists (a file another process makes); fails saying ``what`` did not happen."""
    with anyio.move_on_after(deadline):
        while not await anyio.Path(path).exists():  # noqa: ASYNC110 - another process's file: nothing to wait on
            await anyio.sleep(0.01)
        return
    pytest.fail(f"{what} (waited {deadline:.0f} s)")


async def configured(tmp_path: Path) -> tuple[Path, Path, str]:
    """A data dir with one stdio server (basic.py behind a script that first makes a marker file):
    the data dir, the marker (removed again), the server's key."""
    data_dir = tmp_path / "data"
    marker = tmp_path / "server-started"
    server = tmp_path / "server"  # its own SDK import (a process of its own) is not gated
    server.write_text(f'#!/bin/sh\n: > "$STARTED_MARKER"\nexec "{sys.executable}" "{FIXTURES / "basic.py"}"\n')
    server.chmod(0o755)
    async with SidecarClient.spawn(data_dir) as client:
        added = await client.request("mcpServers/add", {"id": "basic", "command": str(server),
                                                        "env": {"STARTED_MARKER": str(marker)}})
        key = added["server"]["id"]
        await client.wait_for(lambda: "connected" in statuses(client, key), scaled(60))
    assert client.proc.returncode == 0, client.stderr_text()
    marker.unlink()
    return data_dir, marker, key


def gated(tmp_path: Path, data_dir: Path) -> tuple[Path, list[str]]:
    """The gate's folder and the command of a sidecar behind it."""
    gate = tmp_path / "gate"
    gate.mkdir()
    os.mkfifo(gate / "open")
    return gate, [sys.executable, "-c", GATED_SIDECAR, str(gate), "--data-dir", str(data_dir)]


async def initialize_until_sdk_asked(client: SidecarClient, gate: Path) -> None:
    with anyio.fail_after(scaled(30)):
        answer = await client.request("initialize", {"clientInfo": {"name": "test", "version": "0"}})
    assert answer["serverInfo"]["name"] == "covalt-sidecar"
    # The configured server makes the sidecar load the SDK: it asks for it off the event loop.
    await wait_path(gate / "asked", scaled(30), "the sidecar never imported the mcp SDK")
    asked, on_main_thread = (gate / "asked").read_text().split()
    assert asked in ("mcp", "mcp_types") and on_main_thread == "False", asked


async def test_initialize_pings_services_and_server_starts_do_not_wait_for_the_mcp_sdk(tmp_path: Path):
    data_dir, marker, key = await configured(tmp_path)
    gate, command = gated(tmp_path, data_dir)
    async with SidecarClient.spawn(command=command, initialize=False) as client:
        await initialize_until_sdk_asked(client, gate)
        # Held there, the sidecar still answers, has built its services, and has started the server.
        with anyio.fail_after(scaled(10)):
            await client.request("ping")
            listed = await client.request("mcpServers/list")
        assert [s["status"] for s in listed["servers"]] == ["connecting"]
        await wait_path(marker, scaled(30), "the server was not started while the SDK import was held")

        async with await anyio.open_file(gate / "open", "wb") as f:
            await f.write(b"x")
        await client.wait_for(lambda: "connected" in statuses(client, key), scaled(60))
    assert client.proc.returncode == 0, client.stderr_text()


async def test_a_stop_does_not_wait_for_the_mcp_sdk_import(tmp_path: Path):
    """On a busy machine the import takes many seconds; shutdown + exit must not sit through it."""
    data_dir, marker, _key = await configured(tmp_path)
    gate, command = gated(tmp_path, data_dir)
    async with SidecarClient.spawn(command=command, initialize=False) as client:
        await initialize_until_sdk_asked(client, gate)
        await wait_path(marker, scaled(30), "the server was not started while the SDK import was held")
        assert await client.close(timeout=scaled(10)) == 0, client.stderr_text()

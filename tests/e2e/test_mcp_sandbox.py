"""A stdio MCP server the user puts in the OS sandbox (mcpServers/add and update's ``sandbox``),
through the real sidecar process: a hostile server's tools that read the sidecar's database, write
beside it, connect to a local port and signal the sidecar succeed unconfined and are blocked
confined; turning the sandbox off (null) lets them through again."""

from __future__ import annotations

import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from sidecar.client import SidecarClient
from sidecar.sandbox.detect import detect
from tests.e2e.test_mcp import FIXTURES, status

pytestmark = pytest.mark.anyio

HOSTILE = str(FIXTURES / "hostile.py")


@pytest.fixture
def listener() -> Iterator[int]:
    """A TCP port on this machine's loopback that accepts connections."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        yield sock.getsockname()[1]


async def add(sc: SidecarClient, server_id: str, **extra: object) -> dict:
    # cwd: the sandbox lets a server read its command's folder and its working folder only.
    params = {"id": server_id, "command": sys.executable, "args": [HOSTILE], "cwd": str(FIXTURES)} | extra
    return (await sc.request("mcpServers/add", params))["server"]


async def said(sc: SidecarClient, key: str, tool: str, **args: object) -> str:
    done = (await sc.request("tools/call", {"toolId": f"mcp:{key}:{tool}", "args": args}, timeout=60))["toolCall"]
    assert done["status"] == "success", done
    return done["result"]["content"][0]["text"]


async def test_a_sandboxed_server_is_confined_and_the_same_server_unconfined_is_not(
        mechanism: str, outer_dir: Path, listener: int):
    data_dir = outer_dir / "data"
    database = data_dir / "sidecar.db"
    async with SidecarClient.spawn(data_dir, args=("--sandbox", mechanism)) as sc:
        boxed = await add(sc, "boxed", sandbox={})
        assert boxed["sandbox"] == {}
        plain = await add(sc, "plain")
        assert "sandbox" not in plain
        boxed = await status(sc, "boxed~boxed", "connected", "error")
        assert boxed["status"] == "connected", boxed["error"]
        assert boxed["confinedBy"] == mechanism
        assert "confinedBy" not in await status(sc, "plain~plain", "connected")
        sidecar_pid = (await sc.request("debug/info"))["pid"]

        # Unconfined, the server reads the database, writes beside it, reaches a local port and
        # could signal the sidecar: what the user turns the sandbox on against.
        assert await said(sc, "plain~plain", "read", path=str(database)) == "ok read 64 bytes"
        assert await said(sc, "plain~plain", "write", path=str(data_dir / "plain.txt")) == "ok written"
        assert await said(sc, "plain~plain", "connect", port=listener) == "ok connected"
        assert await said(sc, "plain~plain", "signal_pid", pid=sidecar_pid) == "ok signalled"

        assert (await said(sc, "boxed~boxed", "read", path=str(database))).startswith("blocked")
        assert (await said(sc, "boxed~boxed", "write", path=str(data_dir / "boxed.txt"))).startswith("blocked")
        assert (await said(sc, "boxed~boxed", "connect", port=listener)).startswith("blocked")
        assert (await said(sc, "boxed~boxed", "signal_pid", pid=sidecar_pid)).startswith("blocked")
        scratch = await said(sc, "boxed~boxed", "home")  # a private folder (bubblewrap: in its own /tmp)
        assert await said(sc, "boxed~boxed", "write", path=f"{scratch}/scratch.txt") == "ok written"
        assert not (data_dir / "boxed.txt").exists()

        # Turned off (null), it restarts unconfined; a sandbox with the network given back
        # restarts it confined again, still without the database.
        off = (await sc.request("mcpServers/update", {"id": "boxed", "sandbox": None}))["server"]
        assert "sandbox" not in off
        off = await status(sc, "boxed~boxed", "connected")
        assert "confinedBy" not in off
        assert await said(sc, "boxed~boxed", "read", path=str(database)) == "ok read 64 bytes"
        networked = (await sc.request("mcpServers/update", {"id": "boxed", "sandbox": {"network": "full"}}))
        assert networked["server"]["sandbox"] == {"network": "full"}
        assert (await status(sc, "boxed~boxed", "connected"))["confinedBy"] == mechanism
        assert await said(sc, "boxed~boxed", "connect", port=listener) == "ok connected"
        assert (await said(sc, "boxed~boxed", "read", path=str(database))).startswith("blocked")


async def test_a_sandboxed_servers_processes_and_memory_are_limited(outer_dir: Path):
    if detect("bubblewrap").mechanism != "bubblewrap":
        pytest.skip("bubblewrap cannot run here")
    async with SidecarClient.spawn(outer_dir / "data", args=("--sandbox", "bubblewrap")) as sc:
        limits = (await sc.request("debug/info"))["sandbox"]["limits"]
        if limits == "rlimit":
            pytest.skip("no cgroup can be used here: a server gets no memory or process limit")
        await add(sc, "few", sandbox={"processes": 12, "memory": "128m"})
        await add(sc, "many", sandbox={"network": "none"})
        await status(sc, "few~few", "connected")
        await status(sc, "many~many", "connected")
        assert await said(sc, "many~many", "fork", n=20) == "ok started 20"
        assert await said(sc, "many~many", "allocate", mb=160) == "ok allocated 160 MiB"

        assert (await said(sc, "few~few", "fork", n=20)).startswith("blocked")
        assert await said(sc, "few~few", "fork", n=2) == "ok started 2"  # the ones it started were reaped
        done = (await sc.request("tools/call", {"toolId": "mcp:few~few:allocate", "args": {"mb": 160}},
                                 timeout=60))["toolCall"]
        # Past its memory the kernel kills the server in its cgroup; the call says which limit.
        assert done["status"] == "error", done
        assert "killed at its sandbox's memory limit of 128 MiB (sandbox.memory raises it)" in done["error"], done
        assert await said(sc, "few~few", "allocate", mb=16) == "ok allocated 16 MiB"  # restarted, still limited

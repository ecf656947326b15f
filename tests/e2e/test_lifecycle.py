"""The lifecycle of the real process: start, serve, and every way of stopping."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sidecar.client import RemoteError, SidecarClient, sidecar_command

pytestmark = pytest.mark.anyio

HEAVY = {"mcp", "pydantic", "openai", "anthropic", "watchfiles", "keyring", "httpx2", "nh3"}


async def test_initialize_describes_the_server_and_loads_nothing_heavy(sidecar, data_dir):
    info = await sidecar.request("debug/info")
    assert info["dataDir"] == str(data_dir)
    assert not HEAVY & set(info["heavyModulesLoaded"]), info["heavyModulesLoaded"]
    assert (data_dir / "sidecar.db").exists()
    assert (data_dir / "sidecar.lock").read_text().strip() == str(sidecar.proc.pid)


async def test_initialize_result(data_dir):
    async with SidecarClient.spawn(data_dir, initialize=False) as c:
        result = await c.request("initialize", {"clientInfo": {"name": "t", "version": "1"},
                                                "capabilities": {"ui": {"confirm": True}}})
        assert result["serverInfo"] == {"name": "covalt-sidecar", "version": result["serverInfo"]["version"]}
        assert result["protocolVersion"]
        assert result["capabilities"]["maxLineBytes"] == 64 << 20
        assert result["capabilities"]["cancellation"] == ["$/cancelRequest"]


async def test_a_process_id_no_pid_can_have_is_refused_and_the_sidecar_keeps_serving(data_dir):
    async with SidecarClient.spawn(data_dir, initialize=False) as c:
        for bad in (2**40, 0, -1):
            reply = await c.request_raw("initialize", {"processId": bad})
            assert reply["error"]["code"] == -32602 and reply["error"]["data"]["path"] == "params.processId"
        await c.request("initialize", {"processId": os.getpid()})
        assert await c.request("ping") == {}
    assert c.proc.returncode == 0, c.stderr_text()


async def test_shutdown_then_exit_exits_0_and_closes_the_database(data_dir):
    async with SidecarClient.spawn(data_dir) as c:
        assert await c.request("shutdown") is None
        refused = await c.request_raw("ping")
        assert refused["error"]["code"] == -32600 and "shutting down" in refused["error"]["message"]
        await c.notify("exit")
        assert await c.wait_exit() == 0
    # A clean close checkpoints the WAL: the database opens fine and nothing is left in the log.
    assert not (data_dir / "sidecar.db-wal").exists() or (data_dir / "sidecar.db-wal").stat().st_size == 0
    with sqlite3.connect(data_dir / "sidecar.db") as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


async def test_exit_without_shutdown_exits_1(data_dir):
    async with SidecarClient.spawn(data_dir) as c:
        await c.notify("exit")
        assert await c.wait_exit() == 1


async def test_shutdown_cancels_and_answers_in_flight_requests(data_dir):
    async with SidecarClient.spawn(data_dir) as c:
        slow = c.expect(100)
        await c.send({"jsonrpc": "2.0", "id": 100, "method": "debug/sleep", "params": {"ms": 60000}})
        started = time.monotonic()
        assert await c.request("shutdown") is None
        answer = await slow(5)
        assert answer["error"]["code"] == -32800
        assert "shutting down" in answer["error"]["message"]
        assert time.monotonic() - started < 5
        await c.notify("exit")
        assert await c.wait_exit() == 0


async def test_stdin_eof_stops_cleanly(data_dir):
    async with SidecarClient.spawn(data_dir) as c:
        await c.close_stdin()
        assert await c.wait_exit() == 0
        assert "stdin closed" in c.stderr_text()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
async def test_signals_stop_cleanly(data_dir, signum):
    async with SidecarClient.spawn(data_dir) as c:
        slow = c.expect(1)
        await c.send({"jsonrpc": "2.0", "id": 1, "method": "debug/sleep", "params": {"ms": 60000}})
        assert await c.request("ping") == {}  # answered in receive order: the sleep is in flight
        c.proc.send_signal(signum)
        assert (await slow(5))["error"]["code"] == -32800  # in-flight work is answered first
        assert await c.wait_exit() == 0
        assert f"signal {signal.Signals(signum).name}" in c.stderr_text()


async def test_parent_death_stops_the_sidecar(data_dir):
    parent = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        async with SidecarClient.spawn(data_dir, args=("--parent-pid", str(parent.pid))) as c:
            assert await c.request("ping") == {}
            parent.kill()
            parent.wait()
            assert await c.wait_exit(timeout=10) == 0
            assert f"parent process {parent.pid}" in c.stderr_text()
    finally:
        parent.kill()


async def test_initialize_process_id_is_watched_too(data_dir):
    parent = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        async with SidecarClient.spawn(data_dir, initialize=False) as c:
            await c.request("initialize", {"processId": parent.pid})
            parent.kill()
            parent.wait()
            assert await c.wait_exit(timeout=10) == 0
    finally:
        parent.kill()


async def test_a_second_instance_on_the_same_data_dir_is_refused_with_exit_3(sidecar, data_dir):
    async with SidecarClient.spawn(data_dir, initialize=False) as second:
        reply = await second.request_raw("initialize")
        assert reply["error"]["code"] == -32031
        assert reply["error"]["data"] == {
            "lockPath": str(data_dir / "sidecar.lock"),
            "holderPid": sidecar.proc.pid,
        }
        assert await second.wait_exit() == 3
    assert await sidecar.request("ping") == {}  # the first instance is untouched


async def test_the_lock_is_released_when_the_holder_is_killed(data_dir):
    async with SidecarClient.spawn(data_dir) as first:
        first.proc.kill()
        await first.wait_exit()
    async with SidecarClient.spawn(data_dir) as second:
        assert await second.request("ping") == {}


async def test_an_unusable_database_is_reported_at_initialize(data_dir):
    data_dir.mkdir(parents=True)
    (data_dir / "sidecar.db").write_bytes(b"this is not a database" * 100)
    async with SidecarClient.spawn(data_dir, initialize=False) as c:
        reply = await c.request_raw("initialize")
        assert reply["error"]["code"] == -32030
        assert "sidecar.db" in reply["error"]["message"]
        assert await c.wait_exit() == 4
    assert (data_dir / "sidecar.db").read_bytes().startswith(b"this is not a database")


async def test_cancel_request_interrupts_and_answers_32800(sidecar):
    slow = sidecar.expect("long")
    await sidecar.send({"jsonrpc": "2.0", "id": "long", "method": "debug/sleep", "params": {"ms": 60000}})
    await sidecar.notify("$/cancelRequest", {"id": "long"})
    answer = await slow(5)
    assert answer["error"]["code"] == -32800
    assert await sidecar.request("ping") == {}


async def test_progress_is_reported_for_a_work_done_token(sidecar):
    result = await sidecar.request("debug/sleep", {"ms": 100, "workDoneToken": "tok"})
    assert result["sleptMs"] >= 100
    values = [n["params"]["value"] for n in sidecar.notifications
              if n["method"] == "$/progress" and n["params"]["token"] == "tok"]
    assert values[0]["kind"] == "begin" and values[-1] == {"kind": "end"}
    assert [v["percentage"] for v in values if v["kind"] == "report"] == list(range(10, 101, 10))


async def test_server_to_client_requests(sidecar):
    sidecar.handle("ui/hello", lambda params: {"echo": params})
    assert await sidecar.request("debug/roundTrip", {"method": "ui/hello", "params": {"x": 1}}) == {
        "result": {"echo": {"x": 1}}
    }

    def refuse(params):
        raise RemoteError({"code": -32012, "message": "user said no"})

    sidecar.handle("ui/refuse", refuse)
    reply = await sidecar.request_raw("debug/roundTrip", {"method": "ui/refuse"})
    assert reply["error"]["code"] == -32012 and reply["error"]["message"] == "user said no"


async def test_abandoning_a_server_request_cancels_it_toward_the_client(sidecar):
    waiting = sidecar.expect(9)
    await sidecar.send({"jsonrpc": "2.0", "id": 9, "method": "debug/roundTrip",
                        "params": {"method": "ui/slow"}})
    asked = await sidecar.wait_for(lambda: sidecar.server_requests)
    server_id = asked[0]["id"]
    assert server_id.startswith("s")
    await sidecar.notify("$/cancelRequest", {"id": 9})
    assert (await waiting(5))["error"]["code"] == -32800
    cancel = await sidecar.wait_notification("$/cancelRequest")
    assert cancel["params"] == {"id": server_id}
    await sidecar.respond(server_id, {"late": True})  # a late answer is ignored
    assert await sidecar.request("ping") == {}


def test_stdout_claim_keeps_prints_and_children_off_the_wire(tmp_path: Path):
    script = (
        "import os, subprocess, sys\n"
        "from sidecar.process import claim_stdio\n"
        "wire_in, wire_out = claim_stdio()\n"
        "print('a stray print')\n"
        "os.write(1, b'a raw write to fd 1\\n')\n"
        "subprocess.run(['echo', 'a child process'])\n"
        "os.write(wire_out, b'FRAME\\n')\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=30,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, done.stderr
    assert done.stdout == b"FRAME\n"
    for text in (b"a stray print", b"a raw write to fd 1", b"a child process"):
        assert text in done.stderr


def test_bad_command_line_exits_2_with_usage():
    done = subprocess.run(sidecar_command("/tmp/x", "--max-line-bytes", "-5"),
                          capture_output=True, timeout=30, stdin=subprocess.DEVNULL)
    assert done.returncode == 2
    assert b"--max-line-bytes" in done.stderr


def test_data_dir_from_environment(tmp_path: Path):
    env = {**os.environ, "SIDECAR_DATA_DIR": str(tmp_path / "envdir")}
    done = subprocess.run(
        [sys.executable, "-m", "sidecar"],
        input=b'{"jsonrpc":"2.0","id":1,"method":"initialize"}\n',
        capture_output=True, timeout=30, env=env,
    )
    assert b'"dataDir":"%s"' % str(tmp_path / "envdir").encode() in done.stdout
    assert done.returncode == 0


def test_exit_pipelined_right_behind_shutdown_is_a_clean_stop(tmp_path: Path):
    lines = [
        b'{"jsonrpc":"2.0","id":1,"method":"initialize"}',
        b'{"jsonrpc":"2.0","id":2,"method":"shutdown"}',
        b'{"jsonrpc":"2.0","method":"exit"}',
    ]
    done = subprocess.run(sidecar_command(tmp_path / "d"), input=b"\n".join(lines) + b"\n",
                          capture_output=True, timeout=30)
    assert b'"id":2,"result":null' in done.stdout
    assert done.returncode == 0, done.stderr.decode()


async def test_client_close_before_initialize_still_stops_the_sidecar(data_dir):
    async with SidecarClient.spawn(data_dir, initialize=False) as c:
        assert await c.close(timeout=5) == 1  # exit without a successful shutdown


async def test_the_long_lived_heap_is_frozen_after_start_and_after_the_mcp_sdk_loads(sidecar, tmp_path):
    # A full garbage collection walks every object with the event loop held (tens of ms once the MCP
    # SDK is in): what start-up and the SDK import leave alive is taken out of those walks.
    started = (await sidecar.request("debug/info"))["frozenObjects"]
    assert started > 10_000
    server = Path(__file__).resolve().parents[1] / "fixtures" / "mcp" / "basic.py"
    await sidecar.request("mcpServers/add", {"id": "basic", "command": sys.executable, "args": [str(server)]})
    await sidecar.wait_notification("mcpServers/status", lambda p: p["server"]["status"] == "connected", timeout=30)
    assert (await sidecar.request("debug/info"))["frozenObjects"] > started + 10_000
    # Served inside another program (a test's), the heap holds that program's objects: left alone.
    async with SidecarClient.in_process(tmp_path / "in-process", secrets_backend="file") as app:
        assert (await app.request("debug/info")).get("frozenObjects", 0) == 0  # (0 is left out)

"""Hostile tools against the OS sandbox, through the real process (issue 15): each attack fails
its own call with a clear error, the sidecar keeps answering ping within 50 ms, and nothing
outside the chat's workspace changes."""

from __future__ import annotations

import hashlib
import os
import shutil
import statistics
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from sidecar.client import SidecarClient
from tests.listeners import recording_listener
from tests.timing import speed_bound

pytestmark = pytest.mark.anyio

HOSTILE = Path(__file__).resolve().parents[1] / "fixtures" / "toolsets" / "hostile-confine"
SECRET_ENV = "COVALT_CONFINE_TEST_SECRET"
SECRET = "sk-confine-test-0123456789"


def tree(*roots: Path) -> dict[str, str]:
    """Every file under ``roots`` with a digest of its content."""
    found: dict[str, str] = {}
    for root in roots:
        for path in sorted(root.rglob("*")):
            if path.is_file():
                found[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def waited_for_cpu(pid: int, tid: int) -> float:
    """Seconds thread ``tid`` of process ``pid`` has spent runnable but waiting for a CPU (the
    scheduler's run delay, /proc/<pid>/task/<tid>/schedstat); 0 where the kernel does not say."""
    try:
        with open(f"/proc/{pid}/task/{tid}/schedstat") as f:  # noqa: ASYNC230 - a few bytes from procfs
            return int(f.read().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return 0.0


class Pinger:
    """Pings all along. Each round trip is also kept without the time the sidecar's event loop
    thread and this test's thread spent waiting for a CPU meanwhile: on two cores shared with the
    rest of the suite (and other work), a ping can wait tens of ms for a CPU, which says nothing
    of the sidecar. What is left is the sidecar's own doing: its loop running something, or
    sleeping in a blocking call (both were found and fixed: a thread started per child, waited on
    by the loop). A tool hogging the CPU would hide in the run delay, but none of these attacks
    spins (test_hostile_worker's fork bomb does, and is judged on the round trip itself)."""

    def __init__(self, sidecar: SidecarClient) -> None:
        self.sidecar = sidecar
        self.times: list[float] = []  # round trips, seconds
        self.own: list[float] = []  # the same, less the waits for a CPU

    async def run(self) -> None:
        loop_thread = self.sidecar.proc.pid  # python -m sidecar serves on its main thread
        me = (os.getpid(), threading.get_native_id())
        while True:
            waited = waited_for_cpu(loop_thread, loop_thread) + waited_for_cpu(*me)
            start = time.perf_counter()
            await self.sidecar.request("ping")
            took = time.perf_counter() - start
            waited = waited_for_cpu(loop_thread, loop_thread) + waited_for_cpu(*me) - waited
            self.times.append(took)
            self.own.append(took - waited)
            await anyio.sleep(0.01)


async def tool_call(sidecar: SidecarClient, tool: str, args: dict[str, Any], chat_id: str) -> dict[str, Any]:
    params = {"toolId": tool, "args": args, "chatId": chat_id}
    return (await sidecar.request("tools/call", params))["toolCall"]


@pytest.fixture(params=["/var/tmp", "/tmp"])
def outer_dir(request: pytest.FixtureRequest) -> Iterator[Path]:
    """Where the data directory lives: where a user's does (/var/tmp, beside nothing the tool sees),
    and under /tmp, where bubblewrap's private /tmp lies over the way to the workspace."""
    folder = Path(tempfile.mkdtemp(prefix="covalt-confine-", dir=request.param))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


async def test_hostile_tools_fail_only_their_own_calls(mechanism: str, outer_dir: Path, tmp_path: Path):
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("-----BEGIN OPENSSH PRIVATE KEY----- not for tools")
    data_dir = outer_dir / "data"
    async with recording_listener() as (port, accepted):
        async with SidecarClient.spawn(data_dir, env={"HOME": str(home), SECRET_ENV: SECRET,
                                                                "SIDECAR_SANDBOX": mechanism}) as sidecar:
            info = await sidecar.request("debug/info")
            assert info["sandbox"]["mechanism"] == mechanism and info["sandbox"]["confined"] is True
            pid = info["pid"]
            await sidecar.request("toolsets/import", {"path": str(HOSTILE)})
            chat_a = (await sidecar.request("chats/create", {"title": "attacker"}))["chat"]["id"]
            chat_b = (await sidecar.request("chats/create", {"title": "victim"}))["chat"]["id"]
            wrote = await tool_call(sidecar, "write_file", {"path": "diary.txt", "content": "dear diary"}, chat_b)
            assert wrote["status"] == "success", wrote
            ws_b = Path((await tool_call(sidecar, "hostile-confine:where", {}, chat_b))["result"]["workspace"])
            here = (await tool_call(sidecar, "hostile-confine:where", {}, chat_a))["result"]
            ws_a = Path(here["workspace"])
            assert here["pid"] != pid and here["home"] != str(home)
            db = data_dir / "sidecar.db"
            to_db = os.path.relpath(db, ws_a)
            before = tree(home, ws_b)

            attacks: list[tuple[str, dict[str, Any], str | tuple[str, ...]]] = [
                ("connect", {"host": "127.0.0.1", "port": port}, "sandbox.network"),
                ("resolve", {"name": "example.com"}, "sandbox.network"),
                ("connect", {"host": "1.1.1.1", "port": 53}, "sandbox.network"),
                ("write", {"path": "../../sidecar.db"}, "sandbox.writable"),
                ("write", {"path": "../../../sidecar.db"}, "sandbox.writable"),
                ("write", {"path": to_db}, "sandbox.writable"),
                ("write", {"path": str(outer_dir / "planted")}, "sandbox.writable"),
                ("write", {"path": str(home / ".bashrc")}, "outside the tool's sandbox"),
                ("read", {"path": str(db)}, "outside the tool's sandbox"),
                ("read", {"path": f"/proc/{pid}/environ"}, ("No such file", "Permission denied")),
                ("read", {"path": str(ws_b / "diary.txt")}, "outside the tool's sandbox"),
                ("read", {"path": str(home / ".ssh" / "id_ed25519")}, "outside the tool's sandbox"),
                ("read", {"path": "~/.ssh/id_ed25519"}, "No such file"),
                ("signal", {"pid": pid, "name": "SIGSTOP"}, ("No such process", "Operation not permitted")),
                ("signal", {"pid": pid, "name": "SIGKILL"}, ("No such process", "Operation not permitted")),
            ]
            pinger = Pinger(sidecar)
            async with anyio.create_task_group() as pings:
                pings.start_soon(pinger.run)
                for tool, args, wording in attacks:
                    tc = await tool_call(sidecar, f"hostile-confine:{tool}", args, chat_a)
                    assert tc["status"] == "error", (tool, args, tc)
                    wordings = (wording,) if isinstance(wording, str) else wording
                    assert any(w in tc["error"] for w in wordings), (tool, args, tc["error"])
                    assert SECRET not in tc["error"] and "not for tools" not in tc["error"]
                # The data directory is only the path down to what is bound: no database, no other chat.
                listed = await tool_call(sidecar, "hostile-confine:list", {"path": str(data_dir)}, chat_a)
                assert "sidecar.db" not in listed.get("result", [])
                # run_command is confined the same way
                commands = [
                    (f"echo pwned > {db}", "sandbox.writable"),
                    (f"echo pwned > {outer_dir / 'planted'}", "sandbox.writable"),
                    (f"cat /proc/{pid}/environ", None),
                    (f"cat {home / '.ssh' / 'id_ed25519'}", None),
                    (f"cat {ws_b / 'diary.txt'}", None),
                    (f"kill -STOP {pid}", None),
                    (f"kill -KILL {pid}", None),
                    (f"python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), 3)'",
                     "sandbox.network"),
                ]
                for command, wording in commands:
                    tc = await tool_call(sidecar, "run_command", {"command": command}, chat_a)
                    result = tc.get("result") or {}
                    assert tc["status"] == "error" or result.get("exit_code") != 0, (command, tc)
                    if wording:
                        assert wording in result.get("sandbox", ""), (command, result)
                    assert SECRET not in str(tc) and "not for tools" not in str(tc) and "dear diary" not in str(tc)
                # the attacker's own workspace is still its to write
                ok = await tool_call(sidecar, "hostile-confine:write", {"path": "mine.txt"}, chat_a)
                assert ok["status"] == "success", ok
                pings.cancel_scope.cancel()
            assert (await sidecar.request("ping")) == {}
            # Within 50 ms throughout, every ping, once waits for a CPU are taken out (Pinger says
            # why); and the typical round trip within 50 ms as it is.
            worst = max(range(len(pinger.own)), key=pinger.own.__getitem__)
            assert len(pinger.times) > 10 and pinger.own[worst] < speed_bound(0.05), \
                (len(pinger.times), f"{pinger.own[worst] * 1000:.1f} ms of {pinger.times[worst] * 1000:.1f} ms")
            assert statistics.median(pinger.times) < speed_bound(0.05), sorted(pinger.times)[-5:]
            assert (ws_a / "mine.txt").read_text() == "pwned"
    assert accepted == []
    assert not (outer_dir / "planted").exists()
    assert tree(home, ws_b) == before
    assert db.read_bytes()[:16] == b"SQLite format 3\x00"

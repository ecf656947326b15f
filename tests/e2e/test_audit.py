"""The audit trail of a real sidecar: what a SIGKILL can take from the records of calls made
outside a chat is what ``sidecar/store/tool_calls.py`` says (the calls answered in the last
``BATCH_WINDOW`` before the kill, and the batch being written), and nothing before them."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from sidecar.client import SidecarClient
from sidecar.store.tool_calls import BATCH_WINDOW
from tests.http_server import HttpServer, inventory

pytestmark = pytest.mark.anyio

EXAMPLE = Path(__file__).resolve().parents[1] / "fixtures" / "toolsets" / "http_example"
# What the batch being written may add to the window on a loaded 2-core machine: its wait for the
# writer and its commit. Generous: the claim tested is "bounded", not a latency.
WRITE_SLACK = 1.0


async def test_calls_outside_a_chat_survive_a_sigkill_but_the_last_few_ms(data_dir: Path, http_server: HttpServer):
    inventory(http_server)
    answered: list[tuple[str, float]] = []  # (call id, when its reply arrived)
    async with SidecarClient.spawn(data_dir) as sc:
        await sc.request("toolsets/import", {"path": str(EXAMPLE)})
        await sc.request("config/set", {"toolsetId": "http_example", "values": {"api_host": http_server.netloc}})
        await sc.request("secrets/set", {"name": "EXAMPLE_API_KEY", "value": "ek-audit-Zr9Lx4Pw1N"})
        chat = (await sc.request("chats/create", {"title": "t"}))["chat"]["id"]
        for n in range(60):
            got = await sc.request("tools/call", {"toolId": "http_example:get_item", "args": {"id": str(1 + n % 2)}})
            assert got["toolCall"]["status"] == "success", got
            answered.append((got["toolCall"]["id"], time.monotonic()))
        in_chat = await sc.request("tools/call", {"toolId": "http_example:get_item", "args": {"id": "1"},
                                                  "chatId": chat})
        sc.proc.kill()  # SIGKILL right after the last reply: no code of the sidecar runs
        killed = time.monotonic()
        await sc.wait_exit()

    with sqlite3.connect(data_dir / "sidecar.db") as db:
        kept = {r[0] for r in db.execute("SELECT id FROM tool_calls WHERE started_by = 'api' AND chat_id IS NULL")}
        # A call in a chat is written before it runs and when it ends, before its reply.
        assert db.execute("SELECT status FROM tool_calls WHERE id = ?", (in_chat["toolCall"]["id"],)).fetchone() == (
            "success",)
    missing = [(call_id, killed - at) for call_id, at in answered if call_id not in kept]
    # Everything answered before the window (and the write it may wait on) is there...
    assert all(age <= BATCH_WINDOW + WRITE_SLACK for _, age in missing), missing
    # ...and what is missing is the newest calls only: batches are written in reply order.
    ids = [call_id for call_id, _ in answered]
    assert [i for i in ids if i in kept] == ids[:len(ids) - len(missing)], missing

"""The engine alone, over in-memory transports."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
import msgspec
import pytest

from sidecar.rpc import (
    Connection,
    ConnectionClosed,
    MemoryTransport,
    MethodTable,
    RemoteError,
    RequestContext,
    memory_pair,
)
from tests.timing import scaled

pytestmark = pytest.mark.anyio


class Peer:
    """The client side of an in-memory connection."""

    def __init__(self, transport: MemoryTransport) -> None:
        self.t = transport
        self.inbox: list[dict] = []
        self.batches: list[list[bytes]] = []

    async def send(self, obj: Any) -> None:
        await self.t.send((obj if isinstance(obj, bytes) else json.dumps(obj).encode()) + b"\n")

    async def request(self, id: Any, method: str, params: Any = None) -> None:
        msg = {"jsonrpc": "2.0", "id": id, "method": method}
        if params is not None:
            msg["params"] = params
        await self.send(msg)

    async def recv(self, timeout: float = 5) -> dict:
        with anyio.fail_after(scaled(timeout)):
            while not self.inbox:
                frames = await self.t.receive()
                self.batches.append(frames)
                self.inbox += [json.loads(f) for f in frames]
        return self.inbox.pop(0)


class Params(msgspec.Struct, forbid_unknown_fields=True):
    ms: int = 0


def make_table(events: list[str]) -> MethodTable:
    table = MethodTable()

    async def initialize(p, ctx):
        return {"ok": True}

    async def ping(p, ctx):
        events.append("ping")
        return {}

    async def sleep(p: Params, ctx):
        events.append("sleep-start")
        await anyio.sleep(p.ms / 1000)
        return {"slept": p.ms}

    async def turn(p, ctx: RequestContext):
        events.append("turn-start")
        await ctx.wait_cancel_requested()
        events.append("turn-winding-down")
        return {"stopReason": "cancelled"}

    async def ask(p, ctx: RequestContext):
        try:
            return await ctx.request("ui/ask", {"q": 1})
        except ConnectionClosed as exc:
            events.append(f"ask-failed: {exc.message}")
            raise

    async def boom(p, ctx):
        raise ValueError("secret detail")

    async def note(p, ctx):
        events.append("note")

    table.add("initialize", initialize, inline=True)
    table.add("ping", ping, inline=True)
    table.add("sleep", sleep, params_type=Params)
    table.add("turn", turn, cancel="signal")
    table.add("ask", ask)
    table.add("boom", boom)
    table.add("note", note, notification=True)
    return table


@pytest.fixture
async def peer() -> AsyncIterator[tuple[Peer, Connection, list[str]]]:
    server_t, client_t = memory_pair(max_line_bytes=4096)
    events: list[str] = []
    conn = Connection(server_t, make_table(events), max_line_bytes=4096)
    async with anyio.create_task_group() as tg:
        await tg.start(conn.serve)
        p = Peer(client_t)
        await p.request(0, "initialize")
        assert (await p.recv())["result"] == {"ok": True}
        yield p, conn, events
        conn.close()


async def test_signal_mode_cancel_returns_a_normal_result(peer):
    p, conn, events = peer
    await p.request(1, "turn")
    await p.request(2, "ping")
    assert (await p.recv())["id"] == 2
    await p.send({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 1}})
    assert await p.recv() == {"jsonrpc": "2.0", "id": 1, "result": {"stopReason": "cancelled"}}
    assert events[-1] == "turn-winding-down"


async def test_interrupt_mode_cancel_answers_32800_once(peer):
    p, conn, events = peer
    await p.request(1, "sleep", {"ms": 60000})
    await p.send({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 1}})
    await p.send({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 1}})
    assert (await p.recv())["error"]["code"] == -32800
    await p.request(2, "ping")
    assert (await p.recv())["id"] == 2  # nothing else was sent for id 1
    assert conn.inflight_count == 0


async def test_inline_methods_answer_in_receive_order_before_slow_tasks(peer):
    p, conn, events = peer
    await p.request(1, "sleep", {"ms": 50})
    for i in range(2, 7):
        await p.request(i, "ping")
    ids = [(await p.recv())["id"] for _ in range(6)]
    assert ids == [2, 3, 4, 5, 6, 1]


async def test_internal_errors_hide_the_exception(peer, caplog):
    p, conn, events = peer
    await p.request(1, "boom")
    reply = await p.recv()
    assert reply["error"]["code"] == -32603
    assert "secret detail" not in json.dumps(reply)
    error_id = reply["error"]["data"]["errorId"]
    assert any(error_id in r.getMessage() and r.exc_info for r in caplog.records)


async def test_eof_fails_pending_server_requests(peer):
    p, conn, events = peer
    await p.request(1, "ask")
    asked = await p.recv()
    assert asked["method"] == "ui/ask" and asked["id"] == "s1"
    await p.t.aclose()  # the client goes away without answering
    with anyio.fail_after(scaled(5)):
        await conn.eof.wait()
        while not any(e.startswith("ask-failed") for e in events):
            await anyio.sleep(0.01)


async def test_server_request_error_and_bad_result(peer):
    p, conn, events = peer
    await p.request(1, "ask")
    asked = await p.recv()
    await p.send({"jsonrpc": "2.0", "id": asked["id"], "error": {"code": -32012, "message": "no"}})
    reply = await p.recv()
    assert reply["error"] == {"code": -32012, "message": "no"}


async def test_notifications_run_and_unknown_ones_are_ignored(peer):
    p, conn, events = peer
    await p.send({"jsonrpc": "2.0", "method": "note"})
    await p.send({"jsonrpc": "2.0", "method": "unknown/thing"})
    await p.request(1, "ping")
    assert (await p.recv())["id"] == 1
    with anyio.fail_after(scaled(5)):
        while "note" not in events:
            await anyio.sleep(0.01)


async def test_cancel_inflight_answers_every_request(peer):
    p, conn, events = peer
    await p.request(1, "sleep", {"ms": 60000})
    await p.request(2, "turn")
    await p.request(3, "ping")
    assert (await p.recv())["id"] == 3
    conn.refuse_requests()
    assert await conn.cancel_inflight("going down", grace=2) == 0
    replies = {r["id"]: r for r in [await p.recv(), await p.recv()]}
    assert replies[1]["error"] == {"code": -32800, "message": "going down"}
    assert replies[2]["result"] == {"stopReason": "cancelled"}
    await p.request(4, "ping")
    assert (await p.recv())["error"]["code"] == -32600


async def test_queued_messages_go_out_in_one_write():
    server_t, client_t = memory_pair()
    conn = Connection(server_t, make_table([]), init_method=None)
    async with anyio.create_task_group() as tg:
        await tg.start(conn.serve)
        payload = b"".join(b'{"jsonrpc":"2.0","id":%d,"method":"ping"}\n' % i for i in range(200))
        await client_t.send(payload)
        p = Peer(client_t)
        for _ in range(200):
            await p.recv()
        assert len(p.batches) < 200  # joined, not one write per message
        conn.close()


async def test_a_stalled_client_slows_producers_instead_of_growing_memory():
    server_t, client_t = memory_pair(buffer=1)
    conn = Connection(server_t, MethodTable(), init_method=None, out_queue=4)
    sent = 0
    async with anyio.create_task_group() as tg:
        await tg.start(conn.serve)

        async def produce() -> None:
            nonlocal sent
            for i in range(100):
                await conn.notify("tick", {"i": i})
                sent += 1

        tg.start_soon(produce)
        await anyio.sleep(0.2)  # the client reads nothing meanwhile
        assert sent < 10
        received = 0
        with anyio.fail_after(scaled(5)):
            while received < 100:
                received += len(await client_t.receive())
        assert sent == 100
        conn.close()


async def test_params_decode_errors_name_the_path(peer):
    p, conn, events = peer
    await p.request(1, "sleep", {"ms": "x"})
    reply = await p.recv()
    assert reply["error"]["code"] == -32602
    assert reply["error"]["data"] == {"path": "params.ms", "reason": "Expected `int`, got `str`"}


async def test_remote_error_carries_code_and_data():
    err = RemoteError(-32012, "denied", {"why": "user"})
    assert err.__rpc_error__() == (-32012, "denied", {"why": "user"})

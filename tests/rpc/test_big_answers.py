"""A big result (a tool's JSON kept as the worker wrote it) goes out without being copied into
its message, and never delays a ping that came in while it was being made; once it is being
written, lines cannot interleave, so what comes after waits for it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
import msgspec
import pytest

from sidecar.rpc import Connection, MethodTable, Verbatim, memory_pair
from tests.timing import scaled

pytestmark = pytest.mark.anyio

SIZE = 1_000_000
MAX_LINE = 4 << 20


class Client:
    def __init__(self, transport: Any) -> None:
        self.t = transport
        self.lines: list[bytes] = []

    async def request(self, request_id: int, method: str) -> None:
        await self.t.send(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method}).encode() + b"\n")

    async def recv(self) -> dict[str, Any]:
        with anyio.fail_after(scaled(5)):
            while not self.lines:
                self.lines += await self.t.receive()
        return json.loads(self.lines.pop(0))


@pytest.fixture
async def setup() -> AsyncIterator[tuple[Client, anyio.Event, anyio.Event]]:
    started, release = anyio.Event(), anyio.Event()
    table = MethodTable()

    async def initialize(p: Any, ctx: Any) -> dict[str, Any]:
        return {}

    async def ping(p: Any, ctx: Any) -> dict[str, Any]:
        return {}

    async def big(p: Any, ctx: Any) -> dict[str, Any]:
        started.set()
        await release.wait()
        return {"value": Verbatim(msgspec.Raw(b'"' + b"x" * SIZE + b'"')), "after": 1}

    table.add("initialize", initialize, inline=True)
    table.add("ping", ping, inline=True)
    table.add("big", big)
    server_t, client_t = memory_pair(max_line_bytes=MAX_LINE)
    conn = Connection(server_t, table, max_line_bytes=MAX_LINE)
    async with anyio.create_task_group() as tg:
        await tg.start(conn.serve)
        client = Client(client_t)
        await client.request(0, "initialize")
        assert "result" in await client.recv()
        yield client, started, release
        conn.close()


async def test_a_ping_that_came_in_while_a_big_answer_was_made_is_answered_first(setup) -> None:
    client, started, release = setup
    await client.request(1, "big")
    await started.wait()
    release.set()  # the answer is ready at the moment the ping arrives
    await client.request(2, "ping")
    first, second = await client.recv(), await client.recv()
    assert [first["id"], second["id"]] == [2, 1]
    assert second["result"] == {"value": "x" * SIZE, "after": 1}


async def test_a_big_answer_is_one_whole_line_among_others(setup) -> None:
    client, _, release = setup
    release.set()
    await client.request(1, "big")
    for i in range(2, 40):
        await client.request(i, "ping")
    got = {}
    for _ in range(39):
        answer = await client.recv()  # every line parses: nothing was written inside another
        got[answer["id"]] = answer["result"]
    assert got.pop(1) == {"value": "x" * SIZE, "after": 1}
    assert got == {i: {} for i in range(2, 40)}

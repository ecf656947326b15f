"""Lines the engine can't use: each one gets exactly one answer (a notification or a response
none), with id null when the id can't be read, and the connection keeps serving."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
import msgspec
import pytest

from sidecar.rpc import Connection, MemoryTransport, MethodTable, memory_pair
from tests.rpc.hostile import answers_due, hostile_lines
from tests.timing import scaled

pytestmark = pytest.mark.anyio

PARSE, INVALID_REQUEST, INVALID_PARAMS = -32700, -32600, -32602


class Typed(msgspec.Struct, forbid_unknown_fields=True):
    ms: int = 0
    data: Any = None


def inline_table() -> MethodTable:
    # Every method inline: answers leave in receive order, so a sentinel after each line tells
    # which answers belong to it.
    table = MethodTable()

    async def ping(p: Any, ctx: Any) -> dict[str, Any]:
        return {}

    async def typed(p: Typed, ctx: Any) -> dict[str, Any]:
        return {"ms": p.ms}

    async def note(p: Any, ctx: Any) -> None:
        return None

    table.add("ping", ping, inline=True)
    table.add("typed", typed, params_type=Typed, inline=True)
    table.add("note", note, notification=True, inline=True)
    return table


class Client:
    def __init__(self, transport: MemoryTransport) -> None:
        self.t = transport
        self.inbox: list[Any] = []

    async def send_line(self, line: bytes) -> None:
        await self.t.send(line + b"\n")

    async def recv(self, timeout: float = 5) -> Any:
        with anyio.fail_after(scaled(timeout)):
            while not self.inbox:
                self.inbox += [json.loads(f) for f in await self.t.receive()]
        return self.inbox.pop(0)

    async def answers_to(self, line: bytes, sentinel: str) -> list[Any]:
        """Send ``line`` and a ping; everything answered before the ping's answer is the line's."""
        ping = b'{"jsonrpc":"2.0","id":"%s","method":"ping"}' % sentinel.encode()
        await self.t.send(line + b"\n" + ping + b"\n")
        got: list[Any] = []
        while True:
            reply = await self.recv()
            if reply.get("id") == sentinel:
                assert reply == {"jsonrpc": "2.0", "id": sentinel, "result": {}}
                return got
            got.append(reply)


@pytest.fixture
async def client() -> AsyncIterator[Client]:
    server_t, client_t = memory_pair(max_line_bytes=1 << 20, buffer=1024)
    conn = Connection(server_t, inline_table(), init_method=None, shutdown_method=None)
    async with anyio.create_task_group() as tg:
        await tg.start(conn.serve)
        yield Client(client_t)
        conn.close()


DEEP = 5000  # far beyond any recursive parser's limit (about 1000 levels here)


@pytest.mark.parametrize(
    ("line", "code", "hint"),
    [
        # Invalid UTF-8 is a parse error wherever it sits, even where nothing reads it.
        (b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"note":"\xff"}}', PARSE, "UTF-8"),
        (b'{"jsonrpc":"2.0","id":1,"method":"ping","junk":"\xc3"}', PARSE, "UTF-8"),
        (b'{"jsonrpc":"2.0","id":"\xed\xa0\x80","method":"ping"}', PARSE, "UTF-8"),
        (b'{"jsonrpc":"2.0","id":1,"method":"p\xc0\xafng"}', PARSE, "UTF-8"),
        (b'{"jsonrpc":"2.0","id":2,"method":"typed","params":{"ms":1,"x":"\x80"}}', PARSE, "UTF-8"),
        # Nesting deeper than the parser goes: a parse error (the id can't be read either).
        (b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":' + b"[" * DEEP + b"]" * DEEP + b"}}",
         PARSE, "nested"),
        (b'{"jsonrpc":"2.0","id":1,"method":"ping","junk":' + b"[" * DEEP + b"]" * DEEP + b"}", PARSE, "nested"),
        (b"[" * DEEP + b"]" * DEEP, PARSE, "nested"),
        (b'{"a":' * DEEP, PARSE, "nested"),
        # An array that is not JSON is a parse error; only a well-formed one is a refused batch.
        (b"[[[[", PARSE, "parse error"),
        (b'[{"jsonrpc":"2.0","id":1,"method":"ping"}', PARSE, "parse error"),
        (b"[1,]", PARSE, "parse error"),
        (b"[[[[]]]]", INVALID_REQUEST, "batch"),
        (b"[1e400]", INVALID_REQUEST, "batch"),
        (b"42 x", PARSE, "parse error"),
        (b"42", INVALID_REQUEST, "object"),
    ],
)
async def test_an_unreadable_line_is_answered_once_with_id_null(client: Client, line: bytes, code: int, hint: str):
    answers = await client.answers_to(line, "after")
    assert len(answers) == 1, answers
    assert answers[0]["id"] is None
    assert answers[0]["error"]["code"] == code
    assert hint in answers[0]["error"]["message"]


async def test_valid_utf8_still_reaches_the_method(client: Client):
    line = '{"jsonrpc":"2.0","id":4,"method":"typed","params":{"ms":7,"data":"✓"}}'.encode()
    answers = await client.answers_to(line, "s")
    assert answers == [{"jsonrpc": "2.0", "id": 4, "result": {"ms": 7}}]
    answers = await client.answers_to('{"jsonrpc":"2.0","id":"é✓","method":"ping"}'.encode(), "t")
    assert answers == [{"jsonrpc": "2.0", "id": "é✓", "result": {}}]


async def test_nesting_around_the_parser_limit_is_answered_at_every_depth(client: Client):
    # The typed decoder of params runs deeper in the stack than the envelope's: when only it gives
    # up, the id is known and the answer carries it.
    outcomes = set()
    for depth in range(900, 1100, 2):
        params = b'{"data":' + b"[" * depth + b"]" * depth + b"}"
        answers = await client.answers_to(b'{"jsonrpc":"2.0","id":5,"method":"typed","params":%s}' % params, "u")
        assert len(answers) == 1, (depth, answers)
        if "result" in answers[0]:
            outcomes.add("result")
            continue
        outcome = (answers[0]["id"], answers[0]["error"]["code"])
        assert outcome in ((None, PARSE), (5, INVALID_PARAMS)), (depth, answers)
        outcomes.add(outcome)
    assert "result" in outcomes and (None, PARSE) in outcomes


async def test_thousands_of_hostile_lines_each_get_what_they_are_due(client: Client):
    lines = hostile_lines(seed=11, count=3000)
    answered = 0
    for i, line in enumerate(lines):
        answers = await client.answers_to(line, f"sentinel-{i}")
        due = answers_due(line)
        assert len(answers) in due, (i, line[:200], answers)
        answered += len(answers)
        for answer in answers:
            assert answer["jsonrpc"] == "2.0" and ("result" in answer) != ("error" in answer), answer
    assert answered > 2500  # most mutations stay request-shaped or unreadable
    assert (await client.answers_to(b'{"jsonrpc":"2.0","id":1,"method":"ping"}', "end")) == [
        {"jsonrpc": "2.0", "id": 1, "result": {}}
    ]

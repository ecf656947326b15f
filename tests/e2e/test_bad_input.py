"""Hostile and broken input against the real process: each gets the right code, and the process
keeps serving."""

from __future__ import annotations

import json

import pytest

from sidecar.client import SidecarClient
from tests.rpc.hostile import answers_due, hostile_lines

pytestmark = pytest.mark.anyio

PARSE, INVALID_REQUEST, NOT_FOUND, INVALID_PARAMS, INTERNAL = -32700, -32600, -32601, -32602, -32603


async def answer_to_raw(c: SidecarClient, line: bytes) -> dict:
    await c.send_raw(line)
    return await c.next_orphan()


@pytest.mark.parametrize(
    ("line", "code", "hint"),
    [
        (b"this is not json", PARSE, "parse error"),
        (b'{"jsonrpc":"2.0","id":1,"method":"ping"', PARSE, "parse error"),
        (b"\xff\xfe{}", PARSE, "parse error"),  # invalid UTF-8
        # ... also where nothing would read it: params of a method that takes none, an unknown field
        (b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"\xff"}}', PARSE, "UTF-8"),
        (b'{"jsonrpc":"2.0","id":1,"method":"ping","x":"\xed\xa0\x80"}', PARSE, "UTF-8"),
        # nested deeper than the parser goes: the id can't be read
        (b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":' + b"[" * 5000 + b"]" * 5000 + b"}}",
         PARSE, "nested"),
        (b"[[[[", PARSE, "parse error"),  # not JSON, so not a batch either
        (b'[{"jsonrpc":"2.0","id":1,"method":"ping"}]', INVALID_REQUEST, "batch"),
        (b"42", INVALID_REQUEST, "object"),
        (b'"ping"', INVALID_REQUEST, "object"),
        (b'{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}', INVALID_REQUEST, "id must be"),
        (b'{"jsonrpc":"2.0","id":true,"method":"ping"}', INVALID_REQUEST, "id must be"),
        (b'{"jsonrpc":"2.0","id":1.5,"method":"ping"}', INVALID_REQUEST, "id must be"),
        (b'{"jsonrpc":"2.0","id":null,"method":"ping"}', INVALID_REQUEST, "id must be"),
    ],
)
async def test_unanswerable_lines_get_an_error_with_id_null(sidecar, line, code, hint):
    reply = await answer_to_raw(sidecar, line)
    assert reply["id"] is None
    assert reply["error"]["code"] == code
    assert hint in reply["error"]["message"]
    assert await sidecar.request("ping") == {}


@pytest.mark.parametrize(
    ("message", "code", "hint"),
    [
        ({"id": 7, "method": "ping"}, INVALID_REQUEST, 'jsonrpc must be "2.0"'),
        ({"jsonrpc": "1.0", "id": 7, "method": "ping"}, INVALID_REQUEST, 'jsonrpc must be "2.0"'),
        ({"jsonrpc": "2.0", "id": 7}, INVALID_REQUEST, "needs a method"),
        ({"jsonrpc": "2.0", "id": 7, "method": 12}, INVALID_REQUEST, "method must be a string"),
        ({"jsonrpc": "2.0", "id": 7, "method": "ping", "params": [1]}, INVALID_PARAMS, "positional"),
        ({"jsonrpc": "2.0", "id": 7, "method": "ping", "params": "x"}, INVALID_REQUEST, "object"),
        ({"jsonrpc": "2.0", "id": 7, "method": "no/such"}, NOT_FOUND, "no/such"),
        ({"jsonrpc": "2.0", "id": 7, "method": "exit"}, INVALID_REQUEST, "notification"),
    ],
)
async def test_bad_requests_are_answered_with_their_id(sidecar, message, code, hint):
    expect = sidecar.expect(7)
    await sidecar.send(message)
    reply = await expect(10)
    assert reply["error"]["code"] == code, reply
    assert hint in reply["error"]["message"]
    assert await sidecar.request("ping") == {}


async def test_invalid_params_name_the_field(sidecar):
    reply = await sidecar.request_raw("debug/sleep", {"ms": "soon"})
    assert reply["error"]["code"] == INVALID_PARAMS
    assert reply["error"]["data"] == {"path": "params.ms", "reason": "Expected `int`, got `str`"}
    reply = await sidecar.request_raw("debug/sleep", {"ms": 1, "extra": True})
    assert reply["error"]["data"]["path"] == "params"
    assert "extra" in reply["error"]["data"]["reason"]
    reply = await sidecar.request_raw("debug/sleep", {})
    assert "ms" in reply["error"]["data"]["reason"]


async def test_string_ids_work_and_crlf_and_blank_lines_are_tolerated(sidecar):
    expect = sidecar.expect("abc")
    await sidecar.send_raw(b'\n   \n{"jsonrpc":"2.0","id":"abc","method":"ping"}\r\n')
    assert (await expect(10))["result"] == {}


async def test_an_over_long_line_is_skipped_and_the_next_line_is_served(data_dir):
    async with SidecarClient.spawn(data_dir, args=("--max-line-bytes", "1000")) as c:
        expect = c.expect(2)
        big = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": "y" * 5000}})
        # The long line and a good one in one write: the reader must resync at the newline.
        await c.send_raw(big.encode() + b'\n{"jsonrpc":"2.0","id":2,"method":"ping"}\n')
        too_long = await c.next_orphan()
        assert too_long["id"] is None
        assert too_long["error"]["code"] == INVALID_REQUEST
        assert "1000-byte" in too_long["error"]["message"]
        assert (await expect(10))["result"] == {}


async def test_duplicate_in_flight_id_is_refused_and_the_first_still_answers(sidecar):
    first = sidecar.expect(5)
    await sidecar.send({"jsonrpc": "2.0", "id": 5, "method": "debug/sleep", "params": {"ms": 300}})
    await sidecar.send({"jsonrpc": "2.0", "id": 5, "method": "ping"})
    refused = await first(10)
    assert refused["error"]["code"] == INVALID_REQUEST
    assert "already in flight" in refused["error"]["message"]
    second = sidecar.expect(5)
    assert (await second(10))["result"]["sleptMs"] >= 300


async def test_ignored_messages_get_no_answer(sidecar):
    await sidecar.notify("$/cancelRequest", {"id": 999})  # unknown id
    await sidecar.notify("no/suchNotification", {"a": 1})
    await sidecar.send({"jsonrpc": "2.0", "id": "s999", "result": {}})  # unknown server request
    await sidecar.send({"jsonrpc": "2.0", "id": None, "error": {"code": 1, "message": "x"}})
    assert await sidecar.request("ping") == {}
    assert sidecar.orphan_responses == []
    await sidecar.wait_for(lambda: "unknown request id 's999'" in sidecar.stderr_text())


async def test_a_handler_that_raises_answers_internal_error_with_an_error_id_in_the_log(sidecar):
    reply = await sidecar.request_raw("debug/raise", {"message": "boom from the test"})
    error = reply["error"]
    assert error["code"] == INTERNAL
    error_id = error["data"]["errorId"]
    assert error_id in error["message"]
    assert "Traceback" not in json.dumps(reply) and "boom from the test" not in json.dumps(reply)

    def logged() -> bool:
        log = sidecar.stderr_text()
        at = log.find(error_id)
        return at >= 0 and "Traceback" in log[at:] and "boom from the test" in log[at:]

    await sidecar.wait_for(logged)
    assert await sidecar.request("ping") == {}


async def test_request_before_initialize_is_refused(data_dir):
    async with SidecarClient.spawn(data_dir, initialize=False) as c:
        reply = await c.request_raw("ping")
        assert reply["error"]["code"] == -32002
        assert "initialize" in reply["error"]["message"]
        await c.notify("$/progress", {"token": 1})  # notifications before initialize: dropped
        assert (await c.request_raw("initialize"))["result"]["serverInfo"]["name"] == "covalt-sidecar"
        again = await c.request_raw("initialize")
        assert again["error"]["code"] == -32011
        assert await c.request("ping") == {}


async def test_hostile_lines_each_get_one_answer_and_the_process_keeps_serving(sidecar):
    for i, line in enumerate(hostile_lines(seed=2026, count=400)):
        sentinel = sidecar.expect(f"sentinel-{i}")
        await sidecar.send_raw(line + b'\n{"jsonrpc":"2.0","id":"sentinel-%d","method":"ping"}' % i)
        assert (await sentinel(10))["result"] == {}
        answers, sidecar.orphan_responses[:] = list(sidecar.orphan_responses), []
        assert len(answers) in answers_due(line), (i, line[:200], answers)
    assert sidecar.garbage == []
    assert await sidecar.request("ping") == {}

"""scripts/repl_format.py: what the REPL prints."""

from __future__ import annotations

import json
from datetime import datetime

import pytest
from repl_format import (
    format_help,
    format_methods,
    format_notification,
    format_pending,
    format_response,
    format_server_request,
    json_fragments,
    plain,
)


@pytest.mark.parametrize("value", [
    None, True, 3, 2.5, "é\"x", [], {}, [1, "a", None],
    {"a": {"b": [1, {"c": "d" * 100}], "e": []}, "f": "g"},
])
def test_json_fragments_are_valid_json(value):
    for indent in (2, None):
        assert json.loads(plain(json_fragments(value, indent=indent))) == value


def test_json_fragments_styles():
    styles = dict((text, style) for style, text in json_fragments({"k": 1}))
    assert styles['"k"'] == "key" and styles["1"] == "num"


def test_format_response_inline_pretty_and_error(contract):
    small = plain(format_response(2, "ping", {"result": {}}, 1.5))
    assert small == "← #2 ping {}  1.5 ms"
    big = plain(format_response(3, "m", {"result": {"k": "v" * 80}}, 2.0))
    assert big.startswith("← #3 m ok  2.0 ms\n{")
    error = {"error": {"code": -32800, "message": "cancelled", "data": {"why": 1}}}
    text = plain(format_response(4, "debug/sleep", error, 3.0, contract))
    assert text.startswith("✗ #4 debug/sleep error -32800 RequestCancelled: cancelled  3.0 ms")
    assert 'data: {"why": 1}' in text


def test_format_notification_and_server_request():

    when = datetime(2026, 1, 1, 12, 0, 1, 234000)
    note = {"method": "$/progress", "params": {"token": "t", "value": {"kind": "end"}}}
    assert plain(format_notification(note, when)) == (
        '12:00:01.234 ⇠ $/progress {"token": "t", "value": {"kind": "end"}}')
    asked = plain(format_server_request(
        {"id": "s1", "method": "ui/confirm", "params": {"q": 1}}, when=when))
    assert asked.startswith('12:00:01.234 ⇠ server request s1 ui/confirm {"q": 1}')
    assert ":answer s1" in asked and ":error s1" in asked
    long = plain(format_notification({"method": "x", "params": {"a": "b" * 5000}}))
    assert len(long) < 2100 and "more chars" in long


def test_format_help(contract):
    text = plain(format_help(contract, "debug/sleep"))
    assert "Wait ms milliseconds." in text
    assert "ms" in text and "integer" in text and "required" in text
    assert "integer | string | null" in text and "optional, default null" in text
    assert "SleepResult" in text and "{sleptMs: integer}" in text
    assert "RequestCancelled (-32800)" in text
    assert 'example: debug/sleep {"ms": 0}' in text
    assert "{name: string, version?: string}" in plain(format_help(contract,
                                                                             "initialize"))
    assert "did you mean debug/sleep" in plain(format_help(contract, "debug/slep"))
    assert ":answer ID [result]" in plain(format_help(contract))


def test_format_methods_and_pending(contract):
    text = plain(format_methods(contract))
    assert text.index("you send") < text.index("debug/sleep") < text.index("the server sends")
    assert "$/progress" in text.split("the server sends")[1]
    assert plain(format_pending([], [])) == "nothing pending"
    pending = plain(format_pending([(3, "debug/sleep", 1.5)],
                                             [{"id": "s1", "method": "ui/confirm"}]))
    assert "#3  debug/sleep" in pending and "s1  ui/confirm" in pending

"""scripts/repl_parse.py: lines into actions, and the errors a bad line gets."""

from __future__ import annotations

import pytest
from repl_parse import (
    Answer,
    AnswerError,
    Cancel,
    LineError,
    Notify,
    Quit,
    Raw,
    Request,
    ShowHelp,
    ShowLog,
    ShowMethods,
    ShowPending,
    parse_id,
    parse_line,
    raw_expectation,
)


@pytest.mark.parametrize("line", ["", "   ", "\n", "# a comment", "  # indented comment"])
def test_blank_lines_and_comments_do_nothing(line):
    assert parse_line(line) is None


@pytest.mark.parametrize(("line", "action"), [
    ("ping", Request("ping")),
    ("  ping  \n", Request("ping")),
    ('debug/sleep {"ms": 5000}', Request("debug/sleep", {"ms": 5000})),
    ('debug/sleep{"ms":1}', Request("debug/sleep", {"ms": 1})),
    ("debug/sleep {}", Request("debug/sleep", {})),
    ("m [1, 2]", Request("m", [1, 2])),
    ("m 5", Request("m", 5)),  # a bare JSON scalar, to poke at invalid params
    ('m "text"', Request("m", "text")),
    ("debug/sleep ms=5000", Request("debug/sleep", {"ms": 5000})),
    ("m a=1 b=true c=null d=1.5 e=hello f=", Request("m", {"a": 1, "b": True, "c": None,
                                                           "d": 1.5, "e": "hello", "f": ""})),
    ('m name="two words" n="5"', Request("m", {"name": "two words", "n": "5"})),
    ('m p={"q": [1, 2]} l=[1, "x"]', Request("m", {"p": {"q": [1, 2]}, "l": [1, "x"]})),
    ("m a.b=1 a.c=x", Request("m", {"a": {"b": 1, "c": "x"}})),
    ("m x=NaN y=Infinity", Request("m", {"x": "NaN", "y": "Infinity"})),  # not JSON: strings
    ("m url=http://h/p?a=b", Request("m", {"url": "http://h/p?a=b"})),
])
def test_requests(line, action):
    assert parse_line(line) == action


@pytest.mark.parametrize(("line", "action"), [
    ("!exit", Notify("exit")),
    ("! exit", Notify("exit")),
    ('!$/cancelRequest {"id": 3}', Notify("$/cancelRequest", {"id": 3})),
    ("!$/cancelRequest id=s1", Notify("$/cancelRequest", {"id": "s1"})),
])
def test_notifications(line, action):
    assert parse_line(line) == action


@pytest.mark.parametrize(("line", "action"), [
    (":cancel 3", Cancel(3)),
    (":cancel s1", Cancel("s1")),
    (':cancel "3"', Cancel("3")),
    (":cancel", Cancel(None)),
    (':answer s1 {"ok": true}', Answer("s1", {"ok": True})),
    (":answer s1 ok=true", Answer("s1", {"ok": True})),
    (":answer s1", Answer("s1", None)),
    (":answer s2 [1]", Answer("s2", [1])),
    (":error s1 -32012 denied by the user", AnswerError("s1", -32012, "denied by the user")),
    (":error s1 -32012", AnswerError("s1", -32012, "")),
    (":error 7 1", AnswerError(7, 1, "")),
    (':raw {"jsonrpc": "2.0",  "id": 1}', Raw('{"jsonrpc": "2.0",  "id": 1}')),
    (":raw not json at all", Raw("not json at all")),
    (":pending", ShowPending()),
    (":help", ShowHelp()),
    (":help debug/sleep", ShowHelp("debug/sleep")),
    (":h", ShowHelp()),
    (":methods", ShowMethods()),
    (":log", ShowLog(20)),
    (":log 5", ShowLog(5)),
    (":quit", Quit()),
    (":q", Quit()),
    (":exit", Quit()),
    (":QUIT", Quit()),
])
def test_commands(line, action):
    assert parse_line(line) == action


def test_error_code_by_name_needs_the_contract(contract):
    assert parse_line(":error s1 PermissionDenied no", contract) == AnswerError("s1", -32012, "no")
    assert parse_line(":error s1 permissiondenied", contract) == AnswerError("s1", -32012, "")
    with pytest.raises(LineError, match="error code must be an integer"):
        parse_line(":error s1 PermissionDenied no")


@pytest.mark.parametrize(("line", "message"), [
    ('debug/sleep {"ms" 5}', r"bad JSON params: Expecting ':' delimiter \(column 19\)"),
    ('debug/sleep {"ms": 5', "bad JSON params: Expecting ',' delimiter"),
    ("debug/sleep {ms: 5}", "bad JSON params: Expecting property name"),
    ("m [1,]", "bad JSON params"),
    ('m {"a": NaN}', "bad JSON params: NaN is not JSON"),
    ('m {"a": 1} extra', "bad JSON params: Extra data"),
    ('m p={"q" 1}', "bad JSON value for p"),
    ('m p="unterminated', "bad JSON value for p"),
    ("m a=1 a=2", "a is given twice"),
    ("m a=1 a.b=2", "not an object"),
    ("m a=1 oops", "expected key=value, got 'oops'"),
    ("m oops", r"expected params as \{json\}, \[json\] or key=value pairs, got 'oops'"),
    ('m {"a": 1} b=2', "bad JSON params: Extra data"),
    ("!", "expected a method name for a notification"),
    ('{"jsonrpc": "2.0", "method": "ping", "id": 1}', "send it with  :raw"),
    (":cancel 1 2", "usage: :cancel"),
    (":answer", "usage: :answer"),
    (":answer s1 {bad", "bad JSON params"),
    (":error s1", "usage: :error"),
    (":error s1 notacode msg", "error code must be an integer"),
    (":raw", "usage: :raw"),
    (":raw   ", "usage: :raw"),
    (":log x", "usage: :log"),
    (":log 0", "usage: :log"),
    (":pending now", ":pending takes no arguments"),
    (":quit now", ":quit takes no arguments"),
    (":frob", "unknown command :frob"),
    (":cancle 3", "did you mean :cancel"),
])
def test_bad_lines_raise_a_clear_error(line, message):
    with pytest.raises(LineError, match=message):
        parse_line(line)


def test_json_errors_point_at_the_spot():
    with pytest.raises(LineError) as info:
        parse_line('debug/sleep {"ms" 5}')
    _, shown, caret = str(info.value).split("\n")
    assert shown.strip() == 'debug/sleep {"ms" 5}'
    assert caret.index("^") - 2 == shown.index("5") - 2  # same column, both indented by 2


def test_bad_json_never_escapes_as_another_exception():
    for line in ['m {"', "m [[[", "m a={", ":answer s1 [", 'm "', "m a=[1,", '!x {"a":}']:
        with pytest.raises(LineError):
            parse_line(line)


def test_parse_id():
    assert parse_id("12") == 12
    assert parse_id("-1") == -1
    assert parse_id("s3") == "s3"
    assert parse_id('"12"') == "12"
    with pytest.raises(LineError):
        parse_id('"12')
    with pytest.raises(LineError, match="bad JSON id"):
        parse_id('"a" "b"')


@pytest.mark.parametrize(("line", "expected"), [
    ('{"jsonrpc":"2.0","id":5,"method":"ping"}', ("id", 5, "ping")),
    ('{"jsonrpc":"2.0","id":"a","method":"ping"}', ("id", "a", "ping")),
    ('{"jsonrpc":"2.0","method":"exit"}', ("none", None, "exit")),
    ('{"jsonrpc":"2.0","id":true,"method":"ping"}', ("orphan", None, "ping")),
    ('{"jsonrpc":"2.0","id":1}', ("orphan", None, "")),
    ("[1, 2]", ("orphan", None, "")),
    ("not json", ("orphan", None, "")),
])
def test_raw_expectation(line, expected):
    assert raw_expectation(line) == expected

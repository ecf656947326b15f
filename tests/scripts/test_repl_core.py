"""scripts/repl_core.py (parsing, completion, formatting) and scripts/repl end to end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import repl_core as core  # noqa: E402
from repl_core import (  # noqa: E402
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
    parse_line,
)

DOC = {
    "info": {"title": "Test", "version": "1"},
    "methods": [
        {"name": "initialize", "summary": "Start a session. More text.", "params": [
            {"name": "clientInfo", "required": False,
             "schema": {"anyOf": [{"$ref": "#/components/schemas/ClientInfo"}, {"type": "null"}],
                        "default": None}}],
         "x-direction": "clientToServer", "x-kind": "request",
         "result": {"name": "result", "schema": {"type": "object"}}},
        {"name": "ping", "summary": "Liveness check; answers {}.", "params": [],
         "x-direction": "clientToServer", "x-kind": "request",
         "result": {"name": "result", "schema": {"$ref": "#/components/schemas/Empty"}}},
        {"name": "debug/sleep", "summary": "Wait ms milliseconds.", "params": [
            {"name": "workDoneToken", "required": False,
             "schema": {"anyOf": [{"type": "integer"}, {"type": "string"}, {"type": "null"}],
                        "default": None}},
            {"name": "ms", "required": True, "schema": {"type": "integer"}}],
         "x-direction": "clientToServer", "x-kind": "request", "x-cancel": "interrupt",
         "result": {"name": "result", "schema": {"$ref": "#/components/schemas/SleepResult"}},
         "errors": [{"$ref": "#/components/errors/RequestCancelled"}]},
        {"name": "exit", "summary": "Exit the process.", "params": [],
         "x-direction": "clientToServer", "x-kind": "notification"},
        {"name": "$/cancelRequest", "summary": "Cancel a request by id.", "params": [
            {"name": "id", "required": True,
             "schema": {"anyOf": [{"type": "integer"}, {"type": "string"}]}}],
         "x-direction": "both", "x-kind": "notification"},
        {"name": "$/progress", "summary": "Progress.", "params": [],
         "x-direction": "serverToClient", "x-kind": "notification"},
    ],
    "components": {
        "schemas": {
            "ClientInfo": {"type": "object", "required": ["name"],
                           "properties": {"name": {"type": "string"},
                                          "version": {"type": "string"}}},
            "Empty": {"type": "object", "properties": {}},
            "SleepResult": {"type": "object", "required": ["sleptMs"],
                            "properties": {"sleptMs": {"type": "integer"}}},
        },
        "errors": {"RequestCancelled": {"code": -32800, "message": "RequestCancelled"},
                   "PermissionDenied": {"code": -32012, "message": "PermissionDenied"}},
    },
}


@pytest.fixture
def contract() -> core.Contract:
    return core.Contract.from_openrpc(DOC)


# -- parse_line ---------------------------------------------------------------------------------


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
    assert core.parse_id("12") == 12
    assert core.parse_id("-1") == -1
    assert core.parse_id("s3") == "s3"
    assert core.parse_id('"12"') == "12"
    with pytest.raises(LineError):
        core.parse_id('"12')
    with pytest.raises(LineError, match="bad JSON id"):
        core.parse_id('"a" "b"')


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
    assert core.raw_expectation(line) == expected


# -- completion ---------------------------------------------------------------------------------


def texts(candidates: list[core.Candidate]) -> list[str]:
    return [c.text for c in candidates]


def test_method_names_with_their_summary(contract):
    completer = core.ReplCompleter(contract)
    found = completer.candidates("")
    assert texts(found) == ["initialize", "ping", "debug/sleep"]  # client requests only
    assert found[1].meta == "Liveness check; answers {}."
    assert found[0].meta == "Start a session."  # first sentence
    assert texts(completer.candidates("de")) == ["debug/sleep"]
    assert completer.candidates("de")[0].start == -2
    assert texts(completer.candidates("sleep")) == ["debug/sleep"]  # substring match
    assert completer.candidates("zzz") == []


def test_notification_names_after_bang(contract):
    completer = core.ReplCompleter(contract)
    assert texts(completer.candidates("!")) == ["exit", "$/cancelRequest"]
    assert texts(completer.candidates("!$")) == ["$/cancelRequest"]


def test_param_names_as_key_value(contract):
    completer = core.ReplCompleter(contract)
    found = completer.candidates("debug/sleep ")
    assert texts(found) == ["ms=", "workDoneToken="]  # required first
    assert found[0].meta == "integer, required"
    assert found[1].meta == "integer | string | null, optional"
    assert texts(completer.candidates("debug/sleep w")) == ["workDoneToken="]
    assert completer.candidates("debug/sleep w")[0].start == -1
    assert texts(completer.candidates("debug/sleep ms=5 ")) == ["workDoneToken="]
    assert completer.candidates("debug/sleep ms=") == []  # typing a value
    assert completer.candidates("ping ") == []
    assert completer.candidates("nope/x ") == []


def test_param_names_as_json_snippets(contract):
    completer = core.ReplCompleter(contract)
    assert texts(completer.candidates("debug/sleep {")) == ['"ms": ', '"workDoneToken": ']
    found = completer.candidates('debug/sleep {"m')
    assert texts(found) == ['"ms": ']
    assert found[0].start == -2  # replaces the opening quote too
    assert texts(completer.candidates("debug/sleep {w")) == ['"workDoneToken": ']
    assert texts(completer.candidates('debug/sleep {"ms": 5, ')) == ['"workDoneToken": ']
    assert completer.candidates('debug/sleep {"ms": ') == []  # value position
    assert completer.candidates('debug/sleep {"ms": "') == []  # inside a string value
    assert completer.candidates('initialize {"clientInfo": {') == []  # nested object


def test_command_completion(contract):
    completer = core.ReplCompleter(
        contract,
        server_requests=lambda: [("s1", "ui/confirm"), ("s2", "ui/pick")],
        inflight=lambda: [(3, "debug/sleep"), (12, "ping")],
    )
    assert ":help" in texts(completer.candidates(":"))
    assert texts(completer.candidates(":ca")) == [":cancel"]
    assert texts(completer.candidates(":help debug")) == ["debug/sleep"]
    assert "$/progress" in texts(completer.candidates(":help "))  # every method
    assert texts(completer.candidates(":answer ")) == ["s1", "s2"]
    assert completer.candidates(":answer s")[0].meta == "ui/confirm"
    assert texts(completer.candidates(":error s2")) == ["s2"]
    assert texts(completer.candidates(":cancel 1")) == ["12"]
    assert texts(completer.candidates(":error s1 Perm")) == ["-32012"]
    assert completer.candidates(":answer s1 ") == []


def test_completer_speaks_prompt_toolkit(contract):
    completer = core.ReplCompleter(contract)
    completions = list(completer.get_completions(Document("debug/sleep {\"m"), CompleteEvent()))
    assert [(c.text, c.start_position) for c in completions] == [('"ms": ', -2)]


def test_the_repo_contract_loads():
    contract = core.Contract.load(ROOT / "protocol" / "openrpc.json")
    assert "ping" in contract.methods
    assert contract.error_codes["MethodNotFound"] == -32601
    assert all(m.client_sends for m in contract.client_methods("request"))


# -- formatting ---------------------------------------------------------------------------------


@pytest.mark.parametrize("value", [
    None, True, 3, 2.5, "é\"x", [], {}, [1, "a", None],
    {"a": {"b": [1, {"c": "d" * 100}], "e": []}, "f": "g"},
])
def test_json_fragments_are_valid_json(value):
    for indent in (2, None):
        assert json.loads(core.plain(core.json_fragments(value, indent=indent))) == value


def test_json_fragments_styles():
    styles = dict((text, style) for style, text in core.json_fragments({"k": 1}))
    assert styles['"k"'] == "key" and styles["1"] == "num"


def test_format_response_inline_pretty_and_error(contract):
    small = core.plain(core.format_response(2, "ping", {"result": {}}, 1.5))
    assert small == "← #2 ping {}  1.5 ms"
    big = core.plain(core.format_response(3, "m", {"result": {"k": "v" * 80}}, 2.0))
    assert big.startswith("← #3 m ok  2.0 ms\n{")
    error = {"error": {"code": -32800, "message": "cancelled", "data": {"why": 1}}}
    text = core.plain(core.format_response(4, "debug/sleep", error, 3.0, contract))
    assert text.startswith("✗ #4 debug/sleep error -32800 RequestCancelled: cancelled  3.0 ms")
    assert 'data: {"why": 1}' in text


def test_format_notification_and_server_request():
    from datetime import datetime

    when = datetime(2026, 1, 1, 12, 0, 1, 234000)
    note = {"method": "$/progress", "params": {"token": "t", "value": {"kind": "end"}}}
    assert core.plain(core.format_notification(note, when)) == (
        '12:00:01.234 ⇠ $/progress {"token": "t", "value": {"kind": "end"}}')
    asked = core.plain(core.format_server_request(
        {"id": "s1", "method": "ui/confirm", "params": {"q": 1}}, when=when))
    assert asked.startswith('12:00:01.234 ⇠ server request s1 ui/confirm {"q": 1}')
    assert ":answer s1" in asked and ":error s1" in asked
    long = core.plain(core.format_notification({"method": "x", "params": {"a": "b" * 5000}}))
    assert len(long) < 2100 and "more chars" in long


def test_format_help(contract):
    text = core.plain(core.format_help(contract, "debug/sleep"))
    assert "Wait ms milliseconds." in text
    assert "ms" in text and "integer" in text and "required" in text
    assert "integer | string | null" in text and "optional, default null" in text
    assert "SleepResult" in text and "{sleptMs: integer}" in text
    assert "RequestCancelled (-32800)" in text
    assert 'example: debug/sleep {"ms": 0}' in text
    assert "{name: string, version?: string}" in core.plain(core.format_help(contract,
                                                                             "initialize"))
    assert "did you mean debug/sleep" in core.plain(core.format_help(contract, "debug/slep"))
    assert ":answer ID [result]" in core.plain(core.format_help(contract))


def test_format_methods_and_pending(contract):
    text = core.plain(core.format_methods(contract))
    assert text.index("you send") < text.index("debug/sleep") < text.index("the server sends")
    assert "$/progress" in text.split("the server sends")[1]
    assert core.plain(core.format_pending([], [])) == "nothing pending"
    pending = core.plain(core.format_pending([(3, "debug/sleep", 1.5)],
                                             [{"id": "s1", "method": "ui/confirm"}]))
    assert "#3  debug/sleep" in pending and "s1  ui/confirm" in pending


def test_schema_text():
    assert core.schema_text({"type": "integer"}) == "integer"
    assert core.schema_text({"anyOf": [{"type": "integer"}, {"type": "null"}]}) == \
        "integer | null"
    assert core.schema_text({"$ref": "#/components/schemas/X"}) == "X"
    assert core.schema_text({"type": "array", "items": {"type": "string"}}) == "string[]"
    assert core.schema_text({"enum": ["a", "b"]}) == '"a" | "b"'
    assert core.schema_text({}) == "any"


# -- end to end ---------------------------------------------------------------------------------


def run_repl(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_COLOR": "1"}
    return subprocess.run([str(ROOT / "scripts" / "repl"), *args], input=script, text=True,
                          capture_output=True, timeout=60, env=env, cwd=ROOT)


def test_repl_runs_piped_commands():
    done = run_repl("ping\ndebug/info\n")
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "← #2 ping {}" in out
    info = out[out.index("← #3 debug/info"):]
    assert '"pid":' in info and '"version":' in info
    assert "sidecar exited with code 0" in out


def test_repl_script_answers_server_requests_and_reports_bad_input():
    script = "\n".join([
        "debug/roundTrip method=ui/confirm params.q=1",
        ":answer s1 ok=true",
        'debug/sleep {"ms" 5}',
        ":raw this is not json",
        "nope/method",
        "",
    ])
    done = run_repl(script)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert '⇠ server request s1 ui/confirm {"q": 1}' in out
    assert '"result": {"ok": true}' in out
    assert "bad JSON params: Expecting ':' delimiter" in out
    assert "answer to id null: error -32700 ParseError" in out
    assert "error -32601 MethodNotFound" in out
    # in order: each line's answer comes before the next line runs
    assert out.index('"result": {"ok": true}') < out.index("> debug/sleep")

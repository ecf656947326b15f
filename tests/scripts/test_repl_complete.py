"""scripts/repl_complete.py: Tab completion from the contract and from what is in flight."""

from __future__ import annotations

from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document
from repl_complete import Candidate, ReplCompleter


def texts(candidates: list[Candidate]) -> list[str]:
    return [c.text for c in candidates]


def test_method_names_with_their_summary(contract):
    completer = ReplCompleter(contract)
    found = completer.candidates("")
    assert texts(found) == ["initialize", "ping", "debug/sleep"]  # client requests only
    assert found[1].meta == "Liveness check; answers {}."
    assert found[0].meta == "Start a session."  # first sentence
    assert texts(completer.candidates("de")) == ["debug/sleep"]
    assert completer.candidates("de")[0].start == -2
    assert texts(completer.candidates("sleep")) == ["debug/sleep"]  # substring match
    assert completer.candidates("zzz") == []


def test_notification_names_after_bang(contract):
    completer = ReplCompleter(contract)
    assert texts(completer.candidates("!")) == ["exit", "$/cancelRequest"]
    assert texts(completer.candidates("!$")) == ["$/cancelRequest"]


def test_param_names_as_key_value(contract):
    completer = ReplCompleter(contract)
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
    completer = ReplCompleter(contract)
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
    completer = ReplCompleter(
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
    completer = ReplCompleter(contract)
    completions = list(completer.get_completions(Document("debug/sleep {\"m"), CompleteEvent()))
    assert [(c.text, c.start_position) for c in completions] == [('"ms": ', -2)]

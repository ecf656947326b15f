"""Tab completion for ``scripts/repl``: method names, param names and command arguments, from the
contract and from what is in flight."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document
from repl_contract import Contract, MethodSpec, ParamSpec, RequestId, first_sentence
from repl_parse import ALIASES, COMMANDS, METHOD_NAME

_BARE_KEY = re.compile(r"[\w$]*$")


@dataclass(frozen=True)
class Candidate:
    text: str
    start: int  # where the replacement starts, relative to the cursor (<= 0)
    display: str = ""
    meta: str = ""


Listing = Callable[[], Iterable[tuple[RequestId, str]]]


class ReplCompleter(Completer):
    """Method names, param names and command arguments, from the contract and live state.

    ``server_requests`` and ``inflight`` return (id, method) pairs for ``:answer``/``:error`` and
    ``:cancel``.
    """

    def __init__(self, contract: Contract, server_requests: Listing = lambda: (),
                 inflight: Listing = lambda: ()) -> None:
        self.contract = contract
        self.server_requests = server_requests
        self.inflight = inflight

    def get_completions(self, document: Document, complete_event: CompleteEvent
                        ) -> Iterator[Completion]:
        for c in self.candidates(document.text_before_cursor):
            yield Completion(c.text, c.start, display=c.display or None, display_meta=c.meta)

    def candidates(self, text: str) -> list[Candidate]:
        text = text.lstrip()
        if text.startswith(":"):
            return self._command(text)
        kind = "notification" if text.startswith("!") else "request"
        body = text[1:] if kind == "notification" else text
        match = METHOD_NAME.match(body)
        if not match or match.end() == len(body):
            return self._methods(match.group() if match else "", kind)
        method = self.contract.methods.get(match.group())
        return self._params(method, body[match.end():]) if method else []

    # -- pieces

    def _methods(self, word: str, kind: str) -> list[Candidate]:
        methods = self.contract.client_methods(kind)
        prefix = [m for m in methods if m.name.startswith(word)]
        inside = [m for m in methods if word and word in m.name and m not in prefix]
        return [Candidate(m.name, -len(word), m.name, first_sentence(m.summary))
                for m in prefix + inside]

    def _params(self, method: MethodSpec, rest: str) -> list[Candidate]:
        params = sorted(method.params, key=lambda p: not p.required)
        if rest.lstrip().startswith("{"):
            partial = json_key_partial(rest)
            if partial is None:
                return []
            word = partial.lstrip('"')
            given = set(re.findall(r'"([^"\\]*)"\s*:', rest))
            return [Candidate(f'"{p.name}": ', -len(partial), p.name, _param_meta(p))
                    for p in params if p.name.startswith(word) and p.name not in given]
        word = re.split(r"\s", rest)[-1]
        if not re.fullmatch(r"[\w$.-]*", word):  # typing a value, or not key=value at all
            return []
        given = set(re.findall(r"(?:^|\s)([\w$.-]+)=", rest))
        return [Candidate(f"{p.name}=", -len(word), f"{p.name}=", _param_meta(p))
                for p in params if p.name.startswith(word) and p.name not in given]

    def _command(self, text: str) -> list[Candidate]:
        name, space, rest = text.partition(" ")
        if not space:
            return [Candidate(c[0], -len(name), f"{c[0]} {c[1]}".strip(), c[2])
                    for c in COMMANDS if c[0].startswith(name.lower())]
        name = ALIASES.get(name.lower(), name.lower())
        args = rest.split(" ")
        word = args[-1]
        if name == ":help" and len(args) == 1:
            return [Candidate(m.name, -len(word), m.name, first_sentence(m.summary))
                    for m in self.contract.methods.values() if m.name.startswith(word)]
        if name in (":answer", ":error") and len(args) == 1:
            return _id_candidates(self.server_requests(), word)
        if name == ":cancel" and len(args) == 1:
            return _id_candidates(self.inflight(), word)
        if name == ":error" and len(args) == 2:
            return [Candidate(str(code), -len(word), f"{code} {n}", "")
                    for n, code in self.contract.error_codes.items()
                    if str(code).startswith(word) or n.lower().startswith(word.lower())]
        return []


def _id_candidates(pairs: Iterable[tuple[RequestId, str]], word: str) -> list[Candidate]:
    return [Candidate(str(i), -len(word), str(i), method)
            for i, method in pairs if str(i).startswith(word)]


def _param_meta(p: ParamSpec) -> str:
    return f"{p.type_text}, {'required' if p.required else 'optional'}"


def json_key_partial(text: str) -> str | None:
    """If ``text`` (JSON being typed) ends where a top-level object key goes, the part of the key
    typed so far (with its opening quote, if any); otherwise None."""
    depth, in_string, escaped, string_start, last, key_slot = 0, False, False, -1, "", False
    for i, ch in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string, last = False, '"'
            continue
        if ch == '"':
            in_string, string_start, key_slot = True, i, (depth == 1 and last in ("{", ","))
        elif ch in "{[":
            depth, last = depth + 1, ch
        elif ch in "}]":
            depth, last = depth - 1, ch
        elif not ch.isspace():
            last = ch
    if in_string:
        return text[string_start:] if key_slot else None
    match = _BARE_KEY.search(text)  # an unquoted start of a key: {ms
    bare = match[0] if match else ""
    before = text[: len(text) - len(bare)].rstrip()
    if depth == 1 and before[-1:] in ("{", ","):
        return bare
    return None

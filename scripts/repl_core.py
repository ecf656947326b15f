"""The pure parts of ``scripts/repl``: the contract, line parsing, completion and formatting.

Nothing here talks to a process or a terminal, so all of it can be imported and tested on its own.
Formatting functions return prompt_toolkit style fragments, ``[(style, text), ...]``; ``plain()``
turns them into text.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document

Fragments = list[tuple[str, str]]  # (style class in STYLE or "", text)
RequestId = int | str

# Style classes used by the fragments below (prompt_toolkit style strings).
STYLE = {
    "key": "#5fafd7",
    "str": "#87af5f",
    "num": "#d7af5f",
    "lit": "#d787d7",
    "punct": "#8a8a8a",
    "dim": "#8a8a8a",
    "time": "#8a8a8a",
    "id": "bold #d7875f",
    "method": "bold",
    "ok": "#87af5f",
    "err": "bold #ff5f5f",
    "warn": "#d7af00",
    "notif": "#5f87d7",
    "srv": "bold #d75fd7",
    "hint": "italic #8a8a8a",
    "head": "bold underline",
    "prompt": "bold #5fafd7",
    "bottom-toolbar": "noreverse #bcbcbc bg:#303030",
}


def plain(fragments: Iterable[tuple[str, str]]) -> str:
    return "".join(text for _, text in fragments)


# -- the contract (protocol/openrpc.json) ------------------------------------------------------


@dataclass(frozen=True)
class ParamSpec:
    name: str
    required: bool
    schema: dict[str, Any]

    @property
    def type_text(self) -> str:
        return schema_text(self.schema)


@dataclass(frozen=True)
class MethodSpec:
    name: str
    summary: str = ""
    params: tuple[ParamSpec, ...] = ()
    direction: str = "clientToServer"
    kind: str = "request"
    result: dict[str, Any] | None = None
    errors: tuple[str, ...] = ()
    cancel: str | None = None

    @property
    def client_sends(self) -> bool:
        return self.direction in ("clientToServer", "both")

    @property
    def server_sends(self) -> bool:
        return self.direction in ("serverToClient", "both")


@dataclass
class Contract:
    methods: dict[str, MethodSpec] = field(default_factory=dict)
    schemas: dict[str, dict[str, Any]] = field(default_factory=dict)
    error_codes: dict[str, int] = field(default_factory=dict)  # name -> code
    title: str = ""

    @classmethod
    def load(cls, path: str | Path) -> Contract:
        return cls.from_openrpc(json.loads(Path(path).read_text(encoding="utf-8")))

    @classmethod
    def from_openrpc(cls, doc: dict[str, Any]) -> Contract:
        methods = {}
        for m in doc.get("methods", []):
            params = tuple(
                ParamSpec(p["name"], bool(p.get("required")), p.get("schema", {}))
                for p in m.get("params", [])
            )
            errors = tuple(e.get("$ref", "").rsplit("/", 1)[-1] for e in m.get("errors", []))
            methods[m["name"]] = MethodSpec(
                name=m["name"],
                summary=m.get("summary", ""),
                params=params,
                direction=m.get("x-direction", "clientToServer"),
                kind=m.get("x-kind", "request"),
                result=(m.get("result") or {}).get("schema"),
                errors=errors,
                cancel=m.get("x-cancel"),
            )
        components = doc.get("components", {})
        codes = {name: e["code"] for name, e in components.get("errors", {}).items()}
        info = doc.get("info", {})
        title = f"{info.get('title', '')} {info.get('version', '')}".strip()
        return cls(methods, components.get("schemas", {}), codes, title)

    def error_name(self, code: Any) -> str:
        for name, value in self.error_codes.items():
            if value == code:
                return name
        return ""

    def error_code(self, text: str) -> int | None:
        """``-32012`` or ``PermissionDenied`` (any case) -> -32012; None when neither."""
        if re.fullmatch(r"[+-]?\d+", text):
            return int(text)
        for name, code in self.error_codes.items():
            if name.lower() == text.lower():
                return code
        return None

    def client_methods(self, kind: str) -> list[MethodSpec]:
        return [m for m in self.methods.values() if m.client_sends and m.kind == kind]

    def resolve(self, schema: dict[str, Any]) -> dict[str, Any]:
        ref = schema.get("$ref")
        if ref:
            return self.schemas.get(ref.rsplit("/", 1)[-1], {})
        return schema


def schema_text(schema: dict[str, Any] | None) -> str:
    """A short, TypeScript-like rendering of a JSON schema: ``integer | string | null``."""
    if not schema:
        return "any"
    if "$ref" in schema:
        return schema["$ref"].rsplit("/", 1)[-1]
    for union in ("anyOf", "oneOf"):
        if union in schema:
            return " | ".join(schema_text(s) for s in schema[union])
    if "enum" in schema:
        return " | ".join(json.dumps(v) for v in schema["enum"])
    if "const" in schema:
        return json.dumps(schema["const"])
    kind = schema.get("type")
    if isinstance(kind, list):
        return " | ".join(kind)
    if kind == "array":
        item = schema_text(schema.get("items"))
        return f"({item})[]" if " | " in item else f"{item}[]"
    return kind or "any"


def object_shape(contract: Contract, schema: dict[str, Any] | None) -> str:
    """One level of a referenced object's fields: ``{name: string, version?: string}``."""
    if not schema:
        return ""
    refs = [schema] if "$ref" in schema else [s for s in schema.get("anyOf", []) if "$ref" in s]
    for ref in refs:
        target = contract.resolve(ref)
        props = target.get("properties")
        if target.get("type") == "object" and props:
            required = set(target.get("required", []))
            fields = ", ".join(
                f"{k}{'' if k in required else '?'}: {schema_text(v)}" for k, v in props.items()
            )
            return "{" + fields + "}"
    return ""


def placeholder(schema: dict[str, Any] | None, contract: Contract | None = None) -> Any:
    """A value of the schema's type, to build example lines."""
    schema = schema or {}
    if "$ref" in schema and contract is not None:
        return placeholder(contract.resolve(schema), contract)
    for union in ("anyOf", "oneOf"):
        if union in schema:
            return placeholder(schema[union][0], contract)
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    kind = kind[0] if isinstance(kind, list) else kind
    return {"integer": 0, "number": 0, "string": "", "boolean": False, "array": [],
            "null": None}.get(kind, {})


# -- parsing a line into an action ---------------------------------------------------------------


class LineError(ValueError):
    """A line the REPL cannot make sense of; the message says why (and where)."""


@dataclass(frozen=True)
class Request:
    method: str
    params: Any = None


@dataclass(frozen=True)
class Notify:
    method: str
    params: Any = None


@dataclass(frozen=True)
class Cancel:
    id: RequestId | None = None  # None: the most recent request still pending


@dataclass(frozen=True)
class Answer:
    id: RequestId
    result: Any = None


@dataclass(frozen=True)
class AnswerError:
    id: RequestId
    code: int
    message: str = ""


@dataclass(frozen=True)
class Raw:
    line: str


@dataclass(frozen=True)
class ShowHelp:
    method: str | None = None


@dataclass(frozen=True)
class ShowMethods:
    pass


@dataclass(frozen=True)
class ShowPending:
    pass


@dataclass(frozen=True)
class ShowLog:
    lines: int = 20


@dataclass(frozen=True)
class Quit:
    pass


Action = (Request | Notify | Cancel | Answer | AnswerError | Raw | ShowHelp | ShowMethods
          | ShowPending | ShowLog | Quit)

# name, arguments, what it does: drives :help, completion and command parsing.
COMMANDS: tuple[tuple[str, str, str], ...] = (
    (":help", "[method]", "these commands, or a method's summary, params and result"),
    (":methods", "", "every method in the contract"),
    (":cancel", "[ID]", "send $/cancelRequest (default: the latest pending request)"),
    (":pending", "", "requests waiting for an answer, both ways"),
    (":answer", "ID [result]", "answer a server request (JSON or key=value; default null)"),
    (":error", "ID CODE [message]", "answer a server request with an error (CODE: number or name)"),
    (":raw", "LINE", "send LINE to the sidecar verbatim"),
    (":log", "[N]", "the last N lines of the sidecar's stderr (default 20)"),
    (":quit", "", "shut down gracefully and exit (also :q, :exit, Ctrl-D)"),
)
_ALIASES = {":q": ":quit", ":exit": ":quit", ":h": ":help", ":?": ":help"}

_METHOD = re.compile(r"[^\s{\[]+")
_KEY = re.compile(r"([A-Za-z_$][\w$-]*(?:\.[A-Za-z_$][\w$-]*)*)=")
_INT = re.compile(r"[+-]?\d+")


def parse_line(line: str, contract: Contract | None = None) -> Action | None:
    """Turn one input line into an action; None for blank lines and ``# comments``.

    Raises ``LineError`` with a readable message for anything malformed.
    """
    text = line.strip()
    if not text or text.startswith("#"):
        return None
    if text.startswith(":"):
        return _parse_command(text, contract)
    if text.startswith("!"):
        method, params = _parse_call(text, 1, "a notification")
        return Notify(method, params)
    if text.startswith("{"):
        raise LineError("that looks like a whole JSON-RPC message: send it with  :raw " + text)
    method, params = _parse_call(text, 0, "a request")
    return Request(method, params)


def _parse_call(line: str, start: int, what: str) -> tuple[str, Any]:
    """The method name at ``line[start:]`` (after optional spaces) and the params after it."""
    match = _METHOD.match(line, _skip_spaces(line, start))
    if not match:
        raise LineError(f"expected a method name for {what}, e.g.  ping  or  debug/sleep ms=100")
    rest = _skip_spaces(line, match.end())
    return match.group(), (parse_params(line[rest:], line, rest) if rest < len(line) else None)


def _skip_spaces(text: str, pos: int) -> int:
    while pos < len(text) and text[pos].isspace():
        pos += 1
    return pos


def parse_params(text: str, line: str | None = None, start: int = 0) -> Any:
    """``{json}``, ``[json]``, ``key=value ...`` (values are JSON, else strings), or a bare JSON
    scalar (to poke at invalid params). ``text`` is ``line[start:]`` when ``line`` is given, so
    that errors can point into the whole line."""
    text = text.strip()
    if text[:1] in ("{", "["):
        return _parse_json(text, "params", line, start)
    if _KEY.match(text):
        return _parse_pairs(text, line, start)
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except ValueError:
        raise LineError(
            f"expected params as {{json}}, [json] or key=value pairs, got {text.split()[0]!r}"
        ) from None


def _parse_json(text: str, what: str, line: str | None = None, start: int = 0) -> Any:
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise LineError(f"bad JSON {what}: {exc.msg}" + _pointer(text, exc.pos, line, start)) \
            from None
    except ValueError as exc:
        raise LineError(f"bad JSON {what}: {exc}") from None


def _pointer(text: str, pos: int, line: str | None, start: int) -> str:
    """Show where in the line an error is: the line, and a caret under the spot."""
    shown, at = (line, start + pos) if line is not None else (text, pos)
    return f" (column {at + 1})\n  {shown}\n  {' ' * at}^"


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _parse_pairs(text: str, line: str | None = None, start: int = 0) -> dict[str, Any]:
    result: dict[str, Any] = {}
    decoder = json.JSONDecoder(parse_constant=_reject_constant)
    pos = 0
    while True:
        pos = _skip_spaces(text, pos)
        if pos >= len(text):
            return result
        match = _KEY.match(text, pos)
        if not match:
            token = text[pos:].split(None, 1)[0]
            raise LineError(f"expected key=value, got {token!r} (mix of JSON and key=value?)")
        key, pos = match.group(1), match.end()
        if pos < len(text) and text[pos] in '{["':
            try:
                value, end = decoder.raw_decode(text, pos)
            except json.JSONDecodeError as exc:
                raise LineError(f"bad JSON value for {key}: {exc.msg}"
                                + _pointer(text, exc.pos, line, start)) from None
            if end < len(text) and not text[end].isspace():
                extra = text[end:].split()[0]
                raise LineError(f"unexpected {extra!r} right after the value of {key}")
        else:
            end = pos
            while end < len(text) and not text[end].isspace():
                end += 1
            value = _scalar(text[pos:end])
        _set_path(result, key, value)
        pos = end


def _scalar(token: str) -> Any:
    try:
        return json.loads(token, parse_constant=_reject_constant)
    except ValueError:
        return token


def _set_path(target: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, last = dotted.split(".")
    for part in parents:
        target = target.setdefault(part, {})
        if not isinstance(target, dict):
            raise LineError(f"{dotted}: {part} already has a value that is not an object")
    if last in target:
        raise LineError(f"{dotted} is given twice")
    target[last] = value


def parse_id(text: str) -> RequestId:
    """``3`` -> 3, ``s1`` -> "s1", ``"3"`` -> "3" (quote it to force a string)."""
    if _INT.fullmatch(text):
        return int(text)
    if text.startswith('"'):
        return _parse_json(text, "id")  # a JSON string, or an error
    return text


def _parse_command(text: str, contract: Contract | None) -> Action:
    name, _, rest = text.partition(" ")
    name = _ALIASES.get(name.lower(), name.lower())
    rest = rest.strip()
    parse = _COMMAND_PARSERS.get(name)
    if parse is None:
        known = [c[0] for c in COMMANDS] + list(_ALIASES)
        close = difflib.get_close_matches(name, known, n=1)
        hint = f"; did you mean {close[0]}?" if close else "; :help lists them"
        raise LineError(f"unknown command {name}{hint}")
    return parse(rest, contract)


def _no_args(action: Action, name: str) -> Callable[[str, Contract | None], Action]:
    def parse(rest: str, contract: Contract | None) -> Action:
        if rest:
            raise LineError(f"{name} takes no arguments")
        return action

    return parse


def _cmd_help(rest: str, contract: Contract | None) -> Action:
    return ShowHelp(rest or None)


def _cmd_cancel(rest: str, contract: Contract | None) -> Action:
    if len(rest.split()) > 1:
        raise LineError("usage: :cancel [ID]")
    return Cancel(parse_id(rest) if rest else None)


def _cmd_answer(rest: str, contract: Contract | None) -> Action:
    if not rest:
        raise LineError("usage: :answer ID [result]   e.g.  :answer s1 {\"ok\": true}")
    ident, _, result = rest.partition(" ")
    return Answer(parse_id(ident), parse_params(result) if result.strip() else None)


def _cmd_error(rest: str, contract: Contract | None) -> Action:
    parts = rest.split(None, 2)
    if len(parts) < 2:
        raise LineError("usage: :error ID CODE [message]   e.g.  :error s1 -32012 denied by user")
    code = (contract or Contract()).error_code(parts[1])
    if code is None:
        names = ", ".join(contract.error_codes) if contract else ""
        raise LineError(f"error code must be an integer{' or one of: ' + names if names else ''}; "
                        f"got {parts[1]!r}")
    return AnswerError(parse_id(parts[0]), code, parts[2] if len(parts) > 2 else "")


def _cmd_raw(rest: str, contract: Contract | None) -> Action:
    if not rest:
        raise LineError("usage: :raw LINE   e.g.  :raw {\"jsonrpc\": \"2.0\", \"id\": 99}")
    return Raw(rest)


def _cmd_log(rest: str, contract: Contract | None) -> Action:
    if not rest:
        return ShowLog()
    if not rest.isdigit() or int(rest) == 0:
        raise LineError(f"usage: :log [N] with N a positive number of lines, got {rest!r}")
    return ShowLog(int(rest))


_COMMAND_PARSERS: dict[str, Callable[[str, Contract | None], Action]] = {
    ":help": _cmd_help,
    ":methods": _no_args(ShowMethods(), ":methods"),
    ":cancel": _cmd_cancel,
    ":pending": _no_args(ShowPending(), ":pending"),
    ":answer": _cmd_answer,
    ":error": _cmd_error,
    ":raw": _cmd_raw,
    ":log": _cmd_log,
    ":quit": _no_args(Quit(), ":quit"),
}


def raw_expectation(line: str) -> tuple[str, Any, str]:
    """What answer a raw line should get, as (kind, id, method): kind "id" for a request with an
    id we can wait on, "none" for a notification, "orphan" when the answer will have id null
    (not JSON, not an object, bad id, ...)."""
    try:
        message = json.loads(line)
    except ValueError:
        return "orphan", None, ""
    if not isinstance(message, dict):
        return "orphan", None, ""
    method = message.get("method")
    method = method if isinstance(method, str) else ""
    if "id" not in message:
        return ("none" if "method" in message else "orphan"), None, method
    ident = message["id"]
    if method and isinstance(ident, int | str) and not isinstance(ident, bool):
        return "id", ident, method
    return "orphan", None, method


# -- completion --------------------------------------------------------------------------------


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
        match = _METHOD.match(body)
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
        name = _ALIASES.get(name.lower(), name.lower())
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
    bare = re.search(r"([\w$]*)$", text).group(1)  # an unquoted start of a key: {ms
    before = text[: len(text) - len(bare)].rstrip()
    if depth == 1 and before[-1:] in ("{", ","):
        return bare
    return None


def first_sentence(text: str) -> str:
    match = re.match(r"(.+?\.)(\s|$)", text)
    return match.group(1) if match else text


# -- formatting --------------------------------------------------------------------------------


def json_fragments(value: Any, indent: int | None = 2, width: int = 72, _level: int = 0
                   ) -> Fragments:
    """Colorized JSON: pretty with ``indent`` (short scalar-only containers stay on one line),
    or on one line with ``indent=None``."""
    if isinstance(value, dict | list) and value:
        flat = indent is None or (
            all(not isinstance(v, dict | list) for v in _values(value))
            and len(compact_json(value)) + _level * indent <= width
        )
        return _container(value, None if flat else indent, width, _level)
    if isinstance(value, dict | list):
        return [("punct", "{}" if isinstance(value, dict) else "[]")]
    if isinstance(value, str):
        return [("str", json.dumps(value, ensure_ascii=False))]
    if value is None or isinstance(value, bool):
        return [("lit", json.dumps(value))]
    if isinstance(value, int | float):
        return [("num", json.dumps(value))]
    return [("str", json.dumps(str(value), ensure_ascii=False))]


def _values(value: dict | list) -> Iterable[Any]:
    return value.values() if isinstance(value, dict) else value


def _container(value: dict | list, indent: int | None, width: int, level: int) -> Fragments:
    is_dict = isinstance(value, dict)
    open_, close = ("{", "}") if is_dict else ("[", "]")
    items = list(value.items()) if is_dict else [(None, v) for v in value]
    inner = "" if indent is None else "\n" + " " * (indent * (level + 1))
    outer = "" if indent is None else "\n" + " " * (indent * level)
    out: Fragments = [("punct", open_)]
    for n, (key, item) in enumerate(items):
        out.append(("punct", ("," if n else "") + (inner or (" " if n else ""))))
        if is_dict:
            out += [("key", json.dumps(key, ensure_ascii=False)), ("punct", ": ")]
        out += json_fragments(item, indent, width, level + 1)
    out.append(("punct", outer + close))
    return out


def compact_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


def truncate(fragments: Fragments, limit: int) -> Fragments:
    out: Fragments = []
    used = 0
    for style, text in fragments:
        if used + len(text) > limit:
            total = len(plain(fragments))
            out += [(style, text[: limit - used]), ("dim", f"… ({total - limit} more chars)")]
            return out
        out.append((style, text))
        used += len(text)
    return out


def timestamp(when: datetime | None = None) -> str:
    return (when or datetime.now()).strftime("%H:%M:%S.%f")[:-3]


def format_sent(request_id: RequestId, method: str, params: Any = None) -> Fragments:
    out: Fragments = [("dim", "→ "), ("id", f"#{request_id}"), ("", " "), ("method", method)]
    if params is not None:
        out += [("", " ")] + truncate(json_fragments(params, indent=None), 300)
    return out


def format_response(request_id: RequestId, method: str, response: dict[str, Any], ms: float,
                    contract: Contract | None = None) -> Fragments:
    head: Fragments = [("id", f"#{request_id}"), ("", " "), ("method", method), ("", " ")]
    took = [("dim", f"  {ms:.1f} ms")]
    if "error" in response:
        return [("err", "✗ ")] + head + format_error(response["error"], contract, took)
    result = response.get("result")
    body = json_fragments(result)
    if "\n" not in plain(body) and len(plain(body)) <= 60:
        return [("ok", "← ")] + head + body + took
    return [("ok", "← ")] + head + [("ok", "ok")] + took + [("", "\n")] + body


def format_error(error: Any, contract: Contract | None = None, suffix: Fragments = ()
                 ) -> Fragments:
    if not isinstance(error, dict):
        return [("err", "malformed error: ")] + json_fragments(error, indent=None) + list(suffix)
    code = error.get("code")
    name = contract.error_name(code) if contract else ""
    out: Fragments = [("err", f"error {code}{' ' + name if name else ''}"),
                      ("", f": {error.get('message', '')}")] + list(suffix)
    if "data" in error:
        out += [("", "\n"), ("dim", "data: ")] + json_fragments(error["data"])
    return out


def format_notification(message: dict[str, Any], when: datetime | None = None) -> Fragments:
    out: Fragments = [("time", timestamp(when)), ("notif", " ⇠ "), ("notif", message["method"])]
    if "params" in message:
        out += [("", " ")] + json_fragments(message["params"], indent=None)
    return truncate(out, 2000)


def format_server_request(message: dict[str, Any], contract: Contract | None = None,
                          when: datetime | None = None) -> Fragments:
    ident, method = message.get("id"), message.get("method", "")
    out: Fragments = [("time", timestamp(when)), ("srv", " ⇠ server request "),
                      ("id", str(ident)), ("", " "), ("method", method)]
    if "params" in message:
        out += [("", " ")] + truncate(json_fragments(message["params"], indent=None), 2000)
    spec = contract.methods.get(method) if contract else None
    result = f" (result: {schema_text(spec.result)})" if spec and spec.result else ""
    out += [("", "\n"), ("hint", f"  answer with  :answer {ident} {{...}}{result}"
                                 f"  or  :error {ident} CODE message")]
    return out


def format_withdrawn(ident: RequestId, method: str, when: datetime | None = None) -> Fragments:
    return [("time", timestamp(when)), ("srv", " ⇠ the server withdrew "), ("id", str(ident)),
            ("", f" {method}" if method else "")]


def format_orphan(response: dict[str, Any], contract: Contract | None = None) -> Fragments:
    head: Fragments = [("warn", "← answer to id "), ("id", json.dumps(response.get("id"))),
                       ("", ": ")]
    if "error" in response:
        return head + format_error(response["error"], contract)
    return head + json_fragments(response.get("result"))


def format_line_error(error: LineError) -> Fragments:
    return [("err", "? "), ("", str(error))]


def format_help(contract: Contract, name: str | None = None) -> Fragments:
    if name is None:
        return format_commands()
    method = contract.methods.get(name)
    if method is None:
        close = difflib.get_close_matches(name, list(contract.methods), n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else "; :methods lists them"
        return [("err", "? "), ("", f"no method {name!r} in the contract{hint}")]
    who = {"clientToServer": "client → server", "serverToClient": "server → client",
           "both": "both ways"}.get(method.direction, method.direction)
    out: Fragments = [("method", method.name), ("dim", f"  {method.kind}, {who}")]
    if method.cancel:
        out.append(("dim", f", cancel: {method.cancel}"))
    out += [("", f"\n  {method.summary}\n")]
    if method.params:
        out.append(("head", "params\n"))
        width = max(len(p.name) for p in method.params)
        type_width = max(len(p.type_text) for p in method.params)
        for p in method.params:
            default = p.schema.get("default", ...)
            extra = "required" if p.required else (
                "optional" + (f", default {compact_json(default)}" if default is not ... else ""))
            shape = object_shape(contract, p.schema)
            out += [("key", f"  {p.name.ljust(width)}  "), ("", p.type_text.ljust(type_width)),
                    ("dim", f"  {extra}"), ("dim", f"\n  {' ' * width}  {shape}" if shape else ""),
                    ("", "\n")]
    else:
        out.append(("dim", "no params\n"))
    if method.kind == "request":
        shape = object_shape(contract, method.result)
        out += [("head", "result"), ("", f" {schema_text(method.result)}"),
                ("dim", f"  {shape}" if shape else ""), ("", "\n")]
    if method.errors:
        errors = ", ".join(f"{e} ({contract.error_codes.get(e, '?')})" for e in method.errors)
        out += [("head", "errors"), ("", f" {errors}\n")]
    out += [("hint", "example: " + example_line(contract, method))]
    return out


def example_line(contract: Contract, method: MethodSpec) -> str:
    prefix = "!" if method.kind == "notification" else ""
    required = {p.name: placeholder(p.schema, contract) for p in method.params if p.required}
    return f"{prefix}{method.name}" + (f" {compact_json(required)}" if required else "")


def format_commands() -> Fragments:
    lines = [
        ("method [params]", "send a request; params as {json}, [json] or key=value pairs"),
        ("!method [params]", "send a notification"),
        ("# ...", "a comment"),
    ] + [(f"{c[0]} {c[1]}".strip(), c[2]) for c in COMMANDS]
    width = max(len(left) for left, _ in lines)
    out: Fragments = []
    for left, right in lines:
        out += [("method", f"  {left.ljust(width)}  "), ("", right + "\n")]
    out.append(("hint", "  key=value values are JSON when they parse (ms=100, ok=true, "
                        "a.b=\"x y\"), else strings.\n  Tab completes methods, params and ids; "
                        "Ctrl-C clears the line; Ctrl-D quits."))
    return out


def format_methods(contract: Contract) -> Fragments:
    out: Fragments = []
    width = max((len(m) for m in contract.methods), default=0)
    for title, pick in (("you send", lambda m: m.client_sends),
                        ("the server sends", lambda m: m.server_sends)):
        chosen = [m for m in contract.methods.values() if pick(m)]
        if not chosen:
            continue
        out.append(("head", f"{title}\n"))
        for m in chosen:
            out += [("method", f"  {m.name.ljust(width)}  "), ("dim", f"{m.kind:<12}  "),
                    ("", first_sentence(m.summary) + "\n")]
    if not out:
        return [("warn", "the contract lists no methods")]
    out[-1] = (out[-1][0], out[-1][1].rstrip("\n"))
    return out


def format_pending(inflight: Iterable[tuple[RequestId, str, float]],
                   server_requests: Iterable[dict[str, Any]]) -> Fragments:
    """``inflight``: (id, method, seconds waited)."""
    rows = [("dim", "waiting for the server", f"#{i}", m, ("dim", f"{waited:.1f} s"))
            for i, m, waited in inflight]
    rows += [("srv", "waiting for you", str(r.get("id")), str(r.get("method")),
              ("hint", f":answer {r.get('id')} ...")) for r in server_requests]
    id_width = max((len(row[2]) for row in rows), default=0)
    method_width = max((len(row[3]) for row in rows), default=0)
    out: Fragments = []
    for style, who, ident, method, tail in rows:
        out += [(style, f"  {who:<22}  "), ("id", ident.ljust(id_width)),
                ("", f"  {method.ljust(method_width)}  "), tail, ("", "\n")]
    return out[:-1] or [("dim", "nothing pending")]

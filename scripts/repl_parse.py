"""One input line of ``scripts/repl`` turned into an action: a request, a notification, or a
``:command``. Raises ``LineError`` with a readable message (and where) for anything malformed."""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from repl_contract import Contract, RequestId


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
ALIASES = {":q": ":quit", ":exit": ":quit", ":h": ":help", ":?": ":help"}

METHOD_NAME = re.compile(r"[^\s{\[]+")
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
    match = METHOD_NAME.match(line, _skip_spaces(line, start))
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
    name = ALIASES.get(name.lower(), name.lower())
    rest = rest.strip()
    parse = _COMMAND_PARSERS.get(name)
    if parse is None:
        known = [c[0] for c in COMMANDS] + list(ALIASES)
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

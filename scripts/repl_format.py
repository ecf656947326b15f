"""How ``scripts/repl`` shows things: prompt_toolkit style fragments, ``[(style, text), ...]``,
for JSON values, answers, notifications, help and pending requests; ``plain()`` turns them into
text. Nothing here talks to a process or a terminal."""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from repl_contract import Contract, MethodSpec, RequestId, first_sentence, object_shape, placeholder, schema_text
from repl_parse import COMMANDS, LineError

Fragments = list[tuple[str, str]]  # (style class in STYLE or "", text)

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


def format_error(error: Any, contract: Contract | None = None, suffix: Iterable[tuple[str, str]] = ()
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


def format_withdrawn(ident: RequestId | None, method: str, when: datetime | None = None) -> Fragments:
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

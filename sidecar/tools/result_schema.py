"""A tool's result checked against its output schema, the same way for every provider (seed 002:
"validate response against outputSchema"; MCP: a tool with an ``outputSchema`` MUST return
``structuredContent`` that conforms to it). The schema is a Python tool's return annotation, an
MCP tool's ``outputSchema`` or an HTTP tool's declared one; a result that does not fit makes the
call an error of kind ``badOutput`` whose message says where and what was expected
(``result.stats.rows: expected integer, got string``).

Schemas come from outside (a bundle, a server), so they are hostile until checked: a ``$ref`` only
resolves inside the schema itself (a remote one is never fetched), one that refers to itself
without end or is too big cannot be used, and such a schema fails the call saying why rather than
letting a result through unchecked. jsonschema is imported on the first check (start-up does not
need it); each schema is compiled once.
"""

from __future__ import annotations

import json
from typing import Any

import anyio.to_thread

from .validate import Schemas, short

BAD_OUTPUT = "badOutput"  # the errorKind of a call whose result breaks its tool's output schema
MAX_SCHEMA_CHARS = 256 * 1024  # an output schema longer than this (as JSON) is not used
BIG_RESULT = 64 * 1024  # about this many bytes of result are checked off the event loop
_MISSING = object()


def target(provider: str, result: Any) -> tuple[Any, str]:
    """What of a result the schema speaks about, and how a message names it: an MCP tool's
    ``structuredContent``, every other tool's whole result."""
    if provider == "mcp":
        content = result.get("structuredContent", _MISSING) if isinstance(result, dict) else _MISSING
        return content, "result.structuredContent"
    return result, "result"


async def check(schema: dict[str, Any], provider: str, result: Any, size: int | None = None) -> str | None:
    """None when ``result`` fits ``schema``, else the message of the call's error. ``size``: the
    result's bytes of JSON when known; a big result is checked in a thread so the event loop keeps
    serving while jsonschema walks it (it holds the GIL, but gives it back every few ms)."""
    value, where = target(provider, result)
    big = size > BIG_RESULT if size is not None else _bigger_than(value, BIG_RESULT)
    if big:
        return await anyio.to_thread.run_sync(problem, schema, value, where)
    return problem(schema, value, where)


def problem(schema: dict[str, Any], value: Any, where: str = "result") -> str | None:
    """None when ``value`` fits ``schema``, else what is wrong and where, on one line."""
    if value is _MISSING:
        return (f"{where}: missing; the tool declares an outputSchema, so its result must carry "
                "structuredContent that fits it")
    compiled = _compiled(schema)
    if isinstance(compiled, str):
        return f"the tool's outputSchema cannot be checked: {compiled}"
    fast, validator = compiled
    from jsonschema.exceptions import best_match  # loaded with jsonschema by _compiled
    from referencing.exceptions import Unresolvable

    try:
        if (fast is not None and fast(value)) or validator.is_valid(value):
            return None
        error = best_match(validator.iter_errors(value))
    except Unresolvable as exc:
        return (f"the tool's outputSchema cannot be checked: it refers to {short(str(exc.ref), 200)!r}, which is "
                "not inside the schema (remote references are never fetched)")
    except RecursionError:
        return ("the tool's outputSchema cannot be checked: its references lead round in a circle without end, "
                "or the result is nested deeper than it can follow")
    return None if error is None else _say(error, where)


def _say(error: Any, where: str) -> str:
    path = where + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
    kind, wanted, instance = error.validator, error.validator_value, error.instance
    if kind == "type":
        names = wanted if isinstance(wanted, list) else [wanted]
        what = f"expected {' or '.join(str(n) for n in names)}, got {_json_type(instance)}"
    elif kind == "required" and isinstance(instance, dict):
        missing = [name for name in wanted if name not in instance] or list(wanted)
        path, what = f"{path}.{missing[0]}", "missing (the outputSchema requires it)"
    elif kind == "additionalProperties" and isinstance(instance, dict):
        allowed = set(error.schema.get("properties") or {})
        extra = sorted(str(k) for k in instance if k not in allowed) or ["?"]
        path, what = f"{path}.{extra[0]}", "not expected (the outputSchema has no such field)"
    elif kind == "enum" and isinstance(wanted, list):
        choices = ", ".join(short(json.dumps(c), 40) for c in wanted[:10]) + (", ..." if len(wanted) > 10 else "")
        what = f"expected one of {choices}"
    elif kind == "anyOf" and isinstance(wanted, list) and (names := _kinds(wanted)):
        what = f"expected {' or '.join(names)}, got {_json_type(instance)}"  # int | None and the like
    elif kind == "const":
        what = f"expected {short(json.dumps(wanted), 80)}"
    else:
        what = error.message  # minimum, pattern, minItems...: jsonschema says it well enough
    return short(f"{path}: {what}", 600)


def schema_problem(schema: dict[str, Any]) -> str | None:
    """Why ``schema`` cannot serve as an output schema (said when a toolset declares one), or None."""
    compiled = _compiled(schema)
    if isinstance(compiled, str):
        return compiled
    if (ref := _outside_ref(schema)) is not None:
        return (f"it refers to {short(ref, 200)!r}, which is not inside the schema (remote references are "
                "never fetched)")
    return None


def _outside_ref(node: Any) -> str | None:
    stack = [node]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            ref = v.get("$ref")
            if isinstance(ref, str) and not ref.startswith("#"):
                return ref
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return None


# -- compiling -----------------------------------------------------------------------------------

# As arguments' schemas are compiled (one quick check, one jsonschema validator with no remote
# references), but a schema over the limit is refused rather than compiled.
_compiled = Schemas(MAX_SCHEMA_CHARS)


# -- helpers -------------------------------------------------------------------------------------


def _bigger_than(value: Any, limit: int) -> bool:
    """Whether ``value`` is roughly more than ``limit`` bytes of JSON, found by a walk that stops
    as soon as it knows (so a big result costs no more to ask about than a small one)."""
    budget = limit
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            budget -= len(v) + 2
        elif isinstance(v, dict | list):
            budget -= 2 + 4 * len(v)  # before looking inside: a long list answers at once
            if budget < 0:
                return True
            stack.extend(v.values() if isinstance(v, dict) else v)
        else:
            budget -= 8
        if budget < 0:
            return True
    return False


def _kinds(options: list[Any]) -> list[str]:
    """What each alternative of an anyOf is (a type, or a named type's name), or [] if one is neither."""
    names: list[str] = []
    for o in options:
        if isinstance(o, dict) and isinstance(o.get("type"), str):
            names.append(o["type"])
        elif isinstance(o, dict) and isinstance(o.get("$ref"), str):
            names.append(o["$ref"].rsplit("/", 1)[-1])
        else:
            return []
    return names


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "boolean", int: "integer", float: "number", str: "string", list: "array",
            dict: "object"}.get(type(value), type(value).__name__)

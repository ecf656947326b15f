"""Tool arguments checked against the tool's JSON Schema before anything runs.

The schema is the one the model was shown (a manifest's ``input_schema``, one inferred from type
hints, or an MCP server's), so the same check serves every kind of tool. jsonschema is imported on
the first call: it costs tens of milliseconds and start-up does not need it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from ..errors import InvalidParams


def check_args(schema: dict[str, Any] | None, args: Any, where: str = "params.args") -> None:
    """Raise InvalidParams naming the first offending place (``params.args.items[2]``)."""
    if not isinstance(args, dict):
        raise InvalidParams(where, f"expected an object of arguments, got {_json_type(args)}")
    if not schema:
        return
    checker = _checker_of(schema)
    if isinstance(checker, str):
        return  # a tool with a broken schema is still callable; the tool itself sees the arguments
    fast, validator = checker
    from jsonschema.exceptions import best_match  # loaded with jsonschema by _checker_of
    from referencing.exceptions import Unresolvable

    try:
        if (fast is not None and fast(args)) or validator.is_valid(args):
            return
        error = best_match(validator.iter_errors(args))
    except (Unresolvable, RecursionError):
        # A $ref outside the schema (never fetched) or one going round without end: the schema is
        # broken, and the tool, as with any broken schema, sees the arguments itself.
        return
    if error is None:
        return
    path = where + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
    if error.validator == "required" and isinstance(error.instance, dict):
        missing = [name for name in error.validator_value if name not in error.instance]
        if missing:
            raise InvalidParams(f"{path}.{missing[0]}", "missing required argument")
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        allowed = set(error.schema.get("properties") or {})
        extra = sorted(k for k in error.instance if k not in allowed)
        if extra:
            raise InvalidParams(f"{path}.{extra[0]}", "unknown argument")
    raise InvalidParams(path, error.message)


# (a quick check or None, the jsonschema validator), or why the schema cannot be used.
Compiled = tuple["Fast | None", Any]


class Schemas:
    """Schemas compiled once each, found by the schema object itself (kept alive here, so its id
    is not reused): a tool's schema is the same dict on every call, and hashing its JSON each time
    cost more than validating. ``max_chars``: a longer schema (as JSON) is not used."""

    def __init__(self, max_chars: int | None = None) -> None:
        self.max_chars = max_chars
        self._by_id: dict[int, tuple[dict[str, Any], Compiled | str]] = {}

    def __call__(self, schema: dict[str, Any]) -> Compiled | str:
        hit = self._by_id.get(id(schema))
        if hit is not None and hit[0] is schema:
            return hit[1]
        if len(self._by_id) >= 1024:
            self._by_id.clear()
        try:
            text = json.dumps(schema, sort_keys=True)
        except (TypeError, ValueError, RecursionError):
            found: Compiled | str = "it is not JSON"
        else:
            found = (f"it is {len(text) // 1024} KB of JSON, over the {self.max_chars // 1024} KB limit"
                     if self.max_chars is not None and len(text) > self.max_chars else _compile(text))
        self._by_id[id(schema)] = (schema, found)
        return found


_checker_of = Schemas()


@lru_cache(maxsize=512)
def _compile(text: str) -> Compiled | str:
    from jsonschema import validators
    from jsonschema.exceptions import SchemaError
    from referencing import Registry

    schema = json.loads(text)
    cls = validators.validator_for(schema, default=validators.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except SchemaError as exc:
        return f"it is not a valid JSON Schema ({short(exc.message, 200)})"
    except RecursionError:
        return "it is nested too deeply"
    drafts = (validators.Draft6Validator, validators.Draft7Validator, validators.Draft201909Validator,
              validators.Draft202012Validator)  # the quick check speaks their meaning of each keyword
    # An empty registry (the drafts' own metaschemas only): jsonschema's default one fetches any
    # $ref it does not know over the network, and a schema comes from a bundle or a server.
    return (compile_fast(schema) if cls in drafts else None), cls(schema, registry=Registry())


def short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


# -- the quick check -----------------------------------------------------------------------------
#
# jsonschema walks a schema in Python on every call, about as long as the rest of a tool call's
# own work. Most tool schemas use a handful of keywords, so those are compiled once into nested
# closures that say "valid" exactly when jsonschema would (the draft 6 and later meaning of each
# keyword, on the JSON values a decoded request holds). A schema using anything else gets no
# quick check, and "invalid" always goes to jsonschema for its message.

Fast = Callable[[Any], bool]

# Keywords that never change whether a value is valid (format is an annotation by default).
_ANNOTATIONS = frozenset({"title", "description", "default", "examples", "$comment", "$schema", "format",
                          "deprecated", "readOnly", "writeOnly"})
_HANDLED = frozenset({"type", "properties", "required", "additionalProperties", "items", "enum", "anyOf",
                      "$defs", "definitions"})
# A $ref beside anything but annotations means different things in different drafts (draft 7
# ignores the siblings): such a schema is left to jsonschema.
_REF_ALONE = frozenset({"$ref", "$defs", "definitions"}) | _ANNOTATIONS


def _is_integer(v: Any) -> bool:
    t = type(v)
    return t is int or (t is float and v.is_integer())


_TYPES: dict[str, Fast] = {
    "null": lambda v: v is None,
    "boolean": lambda v: type(v) is bool,
    "integer": _is_integer,
    "number": lambda v: type(v) is int or type(v) is float,
    "string": lambda v: type(v) is str,
    "array": lambda v: type(v) is list,
    "object": lambda v: type(v) is dict,
}


# A $ref seen while compiling -> the check of its target, set once that is compiled (a recursive
# type refers to itself before its own check exists).
_Refs = dict[str, list["Fast | None"]]


def compile_fast(schema: Any, root: Any = None, refs: _Refs | None = None) -> Fast | None:
    """A quick check for ``schema``, or None when it uses a keyword this does not handle. ``root``
    and ``refs``: the whole document and the $refs met so far, when compiling a part of it."""
    if schema is True or schema == {}:
        return lambda v: True
    if schema is False:
        return lambda v: False
    root = schema if root is None else root
    refs = {} if refs is None else refs
    if isinstance(schema, dict) and "$ref" in schema:
        return _ref_check(schema, root, refs) if set(schema) <= _REF_ALONE else None
    if not isinstance(schema, dict) or not set(schema) <= _HANDLED | _ANNOTATIONS:
        return None
    checks: list[Fast] = []
    for keyword, part in (("anyOf", _any_of_check), ("type", _type_check), ("enum", _enum_check)):
        if keyword in schema:
            check = part(schema[keyword], root, refs)
            if check is None:
                return None
            checks.append(check)
    if "items" in schema:
        item = compile_fast(schema["items"], root, refs)
        if item is None:
            return None  # also the draft 7 list form of items
        checks.append(lambda v: type(v) is not list or all(item(x) for x in v))
    object_check = _object_check(schema, root, refs)
    if object_check is None:
        return None
    if object_check is not _NO_CHECK:
        checks.append(object_check)
    if not checks:
        return lambda v: True
    if len(checks) == 1:
        return checks[0]
    return lambda v: all(c(v) for c in checks)


def _any_of_check(options: Any, root: Any, refs: _Refs) -> Fast | None:
    if not isinstance(options, list) or not options:
        return None
    compiled = [compile_fast(o, root, refs) for o in options]
    if any(c is None for c in compiled):
        return None
    alternatives = [c for c in compiled if c is not None]
    return lambda v: any(c(v) for c in alternatives)


def _type_check(kind: Any, root: Any, refs: _Refs) -> Fast | None:
    names = kind if isinstance(kind, list) else [kind]
    if not all(isinstance(n, str) and n in _TYPES for n in names):
        return None
    tests = [_TYPES[n] for n in names]
    return tests[0] if len(tests) == 1 else lambda v: any(t(v) for t in tests)


def _enum_check(choices: Any, root: Any, refs: _Refs) -> Fast | None:
    if not isinstance(choices, list) or not all(type(c) is str for c in choices):
        return None  # jsonschema's equality (1 is not True, 1.0 is 1) is not worth repeating
    allowed = frozenset(choices)
    return lambda v: type(v) is str and v in allowed


def _no_check(v: Any) -> bool:
    return True


_NO_CHECK: Fast = _no_check


def _ref_check(schema: dict[str, Any], root: Any, refs: _Refs) -> Fast | None:
    """The check of a local ``$ref`` (``#/$defs/Name``, ``#/definitions/Name``: what msgspec and
    pydantic write for a named type); any other reference is left to jsonschema."""
    ref = schema["$ref"]
    if not isinstance(ref, str) or not isinstance(root, dict):
        return None
    where, _, name = ref.removeprefix("#/").partition("/")
    if not ref.startswith("#/") or where not in ("$defs", "definitions") or not name or "/" in name or "~" in name:
        return None
    target = (root.get(where) or {}).get(name) if isinstance(root.get(where), dict) else None
    if target is None:
        return None
    cell = refs.get(ref)
    if cell is None:
        cell = refs[ref] = [None]
        found = compile_fast(target, root, refs)
        if found is None:
            return None
        cell[0] = found

    def check_ref(v: Any) -> bool:
        check = cell[0]
        assert check is not None  # (set before any value is checked)
        return check(v)

    return check_ref


def _object_check(schema: dict[str, Any], root: Any, refs: _Refs) -> Fast | None:
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    extra = schema.get("additionalProperties", True)
    if not (properties or required or extra is not True):
        return _NO_CHECK
    if not isinstance(properties, dict) or not isinstance(required, list):
        return None
    props: dict[str, Fast] = {}
    for key, sub in properties.items():
        check = compile_fast(sub, root, refs)
        if check is None:
            return None
        props[key] = check
    needed = tuple(required)
    other = compile_fast(extra, root, refs)
    if other is None:
        return None

    def check_object(v: Any) -> bool:
        if type(v) is not dict:
            return True  # these keywords only speak about objects
        for key in needed:
            if key not in v:
                return False
        for key, value in v.items():
            check = props.get(key, other)
            if not check(value):
                return False
        return True

    return check_object


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "boolean", int: "integer", float: "number", str: "string", list: "array"}.get(
        type(value), type(value).__name__)

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
    if checker is None:
        return
    fast, validator = checker
    if (fast is not None and fast(args)) or validator.is_valid(args):
        return
    from jsonschema.exceptions import best_match

    error = best_match(validator.iter_errors(args))
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


# (a quick check or None, the jsonschema validator); None: a broken schema, nothing is checked.
Checker = tuple["Fast | None", Any]

# By the schema object itself (kept alive here, so its id is not reused): the registry hands out
# the same dict on every call of a tool, and hashing its JSON each time cost more than validating.
_BY_ID: dict[int, tuple[dict[str, Any], Checker | None]] = {}


def validator_of(schema: dict[str, Any]) -> Any:
    """The cached jsonschema validator of ``schema`` (an HTTP tool's outputSchema), or None for a
    broken schema."""
    checker = _checker_of(schema)
    return None if checker is None else checker[1]


def _checker_of(schema: dict[str, Any]) -> Checker | None:
    hit = _BY_ID.get(id(schema))
    if hit is not None and hit[0] is schema:
        return hit[1]
    if len(_BY_ID) >= 1024:
        _BY_ID.clear()
    checker = _checker(json.dumps(schema, sort_keys=True))
    _BY_ID[id(schema)] = (schema, checker)
    return checker


@lru_cache(maxsize=512)
def _checker(schema_json: str) -> Checker | None:
    from jsonschema import validators
    from jsonschema.exceptions import SchemaError

    schema = json.loads(schema_json)
    cls = validators.validator_for(schema, default=validators.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except SchemaError:
        # A tool with a broken schema is still callable; the tool itself sees the arguments.
        return None
    drafts = (validators.Draft6Validator, validators.Draft7Validator, validators.Draft201909Validator,
              validators.Draft202012Validator)
    return (compile_fast(schema) if cls in drafts else None), cls(schema)


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
_HANDLED = frozenset({"type", "properties", "required", "additionalProperties", "items", "enum"})


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


def compile_fast(schema: Any) -> Fast | None:
    """A quick check for ``schema``, or None when it uses a keyword this does not handle."""
    if schema is True or schema == {}:
        return lambda v: True
    if schema is False:
        return lambda v: False
    if not isinstance(schema, dict) or not set(schema) <= _HANDLED | _ANNOTATIONS:
        return None
    checks: list[Fast] = []
    if "type" in schema:
        names = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not all(n in _TYPES for n in names):
            return None
        tests = [_TYPES[n] for n in names]
        checks.append(tests[0] if len(tests) == 1 else lambda v: any(t(v) for t in tests))
    if "enum" in schema:
        choices = schema["enum"]
        if not all(type(c) is str for c in choices):
            return None  # jsonschema's equality (1 is not True, 1.0 is 1) is not worth repeating
        allowed = frozenset(choices)
        checks.append(lambda v: type(v) is str and v in allowed)
    if "items" in schema:
        item = compile_fast(schema["items"])
        if item is None:
            return None  # also the draft 7 list form of items
        checks.append(lambda v: type(v) is not list or all(item(x) for x in v))
    object_check = _object_check(schema)
    if object_check is None:
        return None
    if object_check is not _NO_CHECK:
        checks.append(object_check)
    if not checks:
        return lambda v: True
    if len(checks) == 1:
        return checks[0]
    return lambda v: all(c(v) for c in checks)


def _no_check(v: Any) -> bool:
    return True


_NO_CHECK: Fast = _no_check


def _object_check(schema: dict[str, Any]) -> Fast | None:
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    extra = schema.get("additionalProperties", True)
    if not (properties or required or extra is not True):
        return _NO_CHECK
    if not isinstance(properties, dict) or not isinstance(required, list):
        return None
    props: dict[str, Fast] = {}
    for key, sub in properties.items():
        check = compile_fast(sub)
        if check is None:
            return None
        props[key] = check
    needed = tuple(required)
    other = compile_fast(extra)
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

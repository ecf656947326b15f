"""Plain ``f(workspace, **args)`` functions described by a YAML ``input_schema`` (seed 000 §10).

Only ``type``/``required``/``properties``/``items`` are checked: enough to turn a model's bad call
into a path-bearing error instead of a TypeError from deep inside the tool.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ._schema import ArgumentError

_TYPES: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
    "null": lambda v: v is None,
}


def legacy_call(
    fn: Callable[..., Any], workspace: Path | str, args: dict[str, Any], input_schema: dict[str, Any] | None = None
) -> Any:
    check_legacy_args(input_schema, args)
    return fn(Path(workspace), **args)


def check_legacy_args(input_schema: dict[str, Any] | None, args: Any) -> None:
    if not isinstance(args, dict):
        raise ArgumentError("args", f"expected object, got {_json_type(args)}")
    _check(input_schema or {}, args, "args")


def _check(schema: dict[str, Any], value: Any, path: str) -> None:
    declared = schema.get("type")
    if declared is not None:
        names = [declared] if isinstance(declared, str) else list(declared)
        # Unknown type names are let through: this is a guard, not a full validator.
        if not any(_TYPES.get(n, lambda v: True)(value) for n in names):
            raise ArgumentError(path, f"expected {' or '.join(names)}, got {_json_type(value)}")
    what = "argument" if path == "args" else "field"
    if isinstance(value, dict):
        for name in schema.get("required") or ():
            if name not in value:
                raise ArgumentError(f"{path}.{name}", f"missing required {what}")
        props = schema.get("properties") or {}
        for key, item in value.items():
            if key in props:
                _check(props[key], item, f"{path}.{key}")
            elif schema.get("additionalProperties") is False:
                raise ArgumentError(f"{path}.{key}", f"unknown {what}")
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            _check(schema["items"], item, f"{path}[{i}]")


def _json_type(value: Any) -> str:
    for name in ("null", "boolean", "integer", "number", "string", "array", "object"):
        if _TYPES[name](value):
            return name
    return type(value).__name__

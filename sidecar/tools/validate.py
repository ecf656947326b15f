"""Tool arguments checked against the tool's JSON Schema before anything runs.

The schema is the one the model was shown (a manifest's ``input_schema``, one inferred from type
hints, or an MCP server's), so the same check serves every kind of tool. jsonschema is imported on
the first call: it costs tens of milliseconds and start-up does not need it.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from ..errors import InvalidParams


def check_args(schema: dict[str, Any] | None, args: Any, where: str = "params.args") -> None:
    """Raise InvalidParams naming the first offending place (``params.args.items[2]``)."""
    if not isinstance(args, dict):
        raise InvalidParams(where, f"expected an object of arguments, got {_json_type(args)}")
    if not schema:
        return
    validator = _validator_of(schema)
    if validator is None or validator.is_valid(args):
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


# By the schema object itself (kept alive here, so its id is not reused): the registry hands out
# the same dict on every call of a tool, and hashing its JSON each time cost more than validating.
_BY_ID: dict[int, tuple[dict[str, Any], Any]] = {}


def _validator_of(schema: dict[str, Any]) -> Any:
    hit = _BY_ID.get(id(schema))
    if hit is not None and hit[0] is schema:
        return hit[1]
    if len(_BY_ID) >= 1024:
        _BY_ID.clear()
    validator = _validator(json.dumps(schema, sort_keys=True))
    _BY_ID[id(schema)] = (schema, validator)
    return validator


@lru_cache(maxsize=512)
def _validator(schema_json: str) -> Any:
    from jsonschema import validators
    from jsonschema.exceptions import SchemaError

    schema = json.loads(schema_json)
    cls = validators.validator_for(schema, default=validators.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except SchemaError:
        # A tool with a broken schema is still callable; the tool itself sees the arguments.
        return None
    return cls(schema)


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "boolean", int: "integer", float: "number", str: "string", list: "array"}.get(
        type(value), type(value).__name__)

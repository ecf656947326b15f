"""Tool arguments: the quick check compiled from a schema says "valid" exactly when jsonschema
does, and what it cannot judge still goes to jsonschema."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from jsonschema import Draft7Validator, Draft202012Validator

from sidecar.errors import InvalidParams
from sidecar.tools.validate import check_args, compile_fast

SCHEMAS: list[Any] = [
    {},
    True,
    False,
    {"type": "integer"},
    {"type": "number"},
    {"type": ["string", "null"]},
    {"enum": ["a", "b"]},
    {"type": "string", "enum": ["x"], "title": "X", "description": "an x"},
    {"type": "array", "items": {"type": "integer"}},
    {"items": {"type": "object", "required": ["a"]}},
    {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string", "default": "z"}},
     "required": ["a"], "additionalProperties": False, "title": "args"},
    {"type": "object", "additionalProperties": {"type": "boolean"}},
    {"properties": {"a": {"type": "array", "items": {"enum": ["p", "q"]}}}, "required": ["a", "b"]},
    # What msgspec writes for a return annotation: named types under $defs, Optional as anyOf.
    {"$ref": "#/$defs/Out", "$defs": {"Out": {"type": "object", "title": "Out", "required": ["a"],
                                              "properties": {"a": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
                                                             "c": {"$ref": "#/$defs/Out"}}}}},
    {"type": "array", "items": {"$ref": "#/definitions/P"}, "definitions": {"P": {"enum": ["p", "q"]}}},
    {"anyOf": [{"type": "string"}, {"type": "object", "additionalProperties": False}]},
]
VALUES: list[Any] = [
    None, True, False, 0, 1, 1.0, 1.5, -2, 2**70, "", "a", "x", "p", [], [1, 2], [1.0, True], ["p", "q"],
    ["p", "r"], {}, {"a": 1}, {"a": 1.0}, {"a": True}, {"a": 1, "b": "s"}, {"a": 1, "b": 2}, {"a": 1, "c": 1},
    {"a": ["p"], "b": None}, {"a": ["r"], "b": 1}, {"c": True, "d": False}, {"c": 1}, [{"a": 1}, {}],
]


@pytest.mark.parametrize("schema", SCHEMAS, ids=[str(i) for i in range(len(SCHEMAS))])
def test_the_quick_check_agrees_with_jsonschema(schema: Any) -> None:
    fast = compile_fast(schema)
    assert fast is not None, "every schema here uses only keywords the quick check handles"
    for cls, value in itertools.product((Draft202012Validator, Draft7Validator), VALUES):
        assert fast(value) == cls(schema).is_valid(value), (cls.__name__, schema, value)


def test_a_keyword_it_does_not_handle_leaves_the_schema_to_jsonschema() -> None:
    assert compile_fast({"type": "string", "minLength": 2}) is None
    assert compile_fast({"type": "object", "properties": {"a": {"$ref": "#/$defs/a"}}}) is None
    assert compile_fast({"type": "array", "items": [{"type": "string"}]}) is None  # draft 7 tuple form
    assert compile_fast({"enum": [1, True]}) is None
    assert compile_fast({"$ref": "https://example.com/s.json"}) is None  # jsonschema says it cannot resolve
    assert compile_fast({"$ref": "#/$defs/a", "$defs": {"a": {}}, "type": "string"}) is None  # drafts disagree
    schema = {"type": "object", "properties": {"name": {"type": "string", "minLength": 2}}}
    check_args(schema, {"name": "ok"})
    with pytest.raises(InvalidParams) as err:
        check_args(schema, {"name": "x"})
    assert err.value.path == "params.args.name"


def test_bad_arguments_still_get_jsonschema_s_message() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"],
              "additionalProperties": False}
    check_args(schema, {"n": 3})
    for args, path, reason in (({}, "params.args.n", "missing required argument"),
                               ({"n": 3, "m": 1}, "params.args.m", "unknown argument"),
                               ({"n": "3"}, "params.args.n", "'3' is not of type 'integer'")):
        with pytest.raises(InvalidParams) as err:
            check_args(schema, args)
        assert (err.value.path, err.value.reason) == (path, reason)

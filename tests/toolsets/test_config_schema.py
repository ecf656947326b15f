"""config_schema in toolset.yaml (seed 004): what is accepted, and each mistake named at its field."""

from __future__ import annotations

from typing import Any

import pytest

from sidecar.toolsets.manifest import ManifestError, from_data

BASE: dict[str, Any] = {"manifest_version": "1", "id": "weather", "name": "Weather",
                        "tools": [{"id": "forecast", "entrypoint": "tools.weather:forecast"}]}


def manifest(top: Any = None, tool: Any = None) -> dict[str, Any]:
    data = {**BASE, "tools": [dict(BASE["tools"][0])]}
    if top is not None:
        data["config_schema"] = top
    if tool is not None:
        data["tools"][0]["config_schema"] = tool
    return data


def test_the_seed_shapes_are_accepted_at_both_levels():
    m = from_data(manifest(
        {"api_key": {"description": "Your API key", "secret": True, "required": True},
         "endpoint": {"description": "API endpoint URL", "secret": False, "default": "https://api.example.com"}},
        {"days": {"type": "integer", "default": 3}, "metric": {"type": "boolean", "default": False},
         "ratio": {"type": "number", "default": 2}})).manifest
    assert m.config_schema["api_key"].secret and m.config_schema["api_key"].type == "string"
    assert m.config_schema["endpoint"].default == "https://api.example.com"
    days = m.tools[0].config_schema["days"]
    assert (days.type, days.default, days.required) == ("integer", 3, False)


@pytest.mark.parametrize(("top", "tool", "path", "reason"), [
    ({"API_KEY": {}}, None, "config_schema.API_KEY", "not a valid field name: 1-64 characters: lower-case letters"),
    ({"1st": {}}, None, "config_schema.1st", "not starting with a digit"),
    ({"a": "the key"}, None, "config_schema.a", "Expected `object`, got `str` (a field is a mapping"),
    ({"a": {"kind": "x"}}, None, "config_schema.a", "unknown field `kind`"),
    (None, {"a": {"type": "float"}}, "tools[0].config_schema.a.type", "Invalid enum value 'float'"),
    (None, {"a": {"required": "yes"}}, "tools[0].config_schema.a.required", "Expected `bool`"),
    ({"a": {"type": "integer", "default": "5"}}, None, "config_schema.a.default", "'5' is not an integer"),
    ({"a": {"type": "integer", "default": True}}, None, "config_schema.a.default", "True is not an integer"),
    ({"a": {"secret": True, "type": "integer"}}, None, "config_schema.a.type", "a secret field holds a string"),
    ({"a": {"secret": True, "default": "sk-1"}}, None, "config_schema.a.default", "a secret field has no default"),
    ({"a": {}}, {"a": {}}, "tools[0].config_schema.a", "also a toolset-level field"),
    ([{"a": {}}], None, "config_schema", "Expected `object`, got `array`"),
])
def test_mistakes_point_at_the_field(top: Any, tool: Any, path: str, reason: str):
    with pytest.raises(ManifestError) as err:
        from_data(manifest(top, tool))
    assert err.value.path == path
    assert reason in err.value.reason

"""What one tool's configuration (seed 004) amounts to, worked out from its schemas and the values
set: which required keys are missing, the tool's status, and the settings a call gets short of
the secret values. Pure functions over stored data; ``tools/config.py`` is the service around them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec

from ..api.tools import ToolStatus
from ..store.tool_config import TOOLSET_SCOPE, ConfigValue
from .config_schema import ConfigFieldDecl


def schema_of(stored: dict[str, Any] | None) -> dict[str, ConfigFieldDecl]:
    """A stored config_schema (plain data, checked when its manifest was) as field declarations."""
    return msgspec.convert(stored or {}, dict[str, ConfigFieldDecl])


def secret_name(toolset_id: str, scope: str, key: str) -> str:
    """The secret store's name of a secret field's value. Internal names are lower-case and hold
    ':', so they never collide with a user's secrets (``^[A-Z_][A-Z0-9_]*$``)."""
    return f"config:{toolset_id}:{scope}:{key}"


@dataclass(frozen=True, slots=True)
class Plan:
    """What a call of one tool gets as ``settings``, short of the secret values: the fields of its
    toolset, then its own (names never clash: the manifest check refuses that)."""

    toolset_id: str
    values: dict[str, Any]  # every non-secret field that has a value or a default
    secrets: dict[str, str]  # key -> secret store name, for each secret field that is set
    missing: list[str]  # required keys with neither a value nor a default, toolset's first
    toolset_keys: frozenset[str] = frozenset()  # the fields that are the toolset's, not the tool's


def plan(toolset_id: str, tool_scope: str | None, toolset_schema: dict[str, ConfigFieldDecl],
         tool_schema: dict[str, ConfigFieldDecl], values: list[ConfigValue]) -> Plan:
    """``values``: what is set in the toolset (any scope); ``tool_scope`` None: the toolset's
    fields alone."""
    by_key = {(v.scope, v.key): v for v in values}
    out: dict[str, Any] = {}
    secrets: dict[str, str] = {}
    missing: list[str] = []
    layers = [(TOOLSET_SCOPE, toolset_schema)] + ([(tool_scope, tool_schema)] if tool_scope else [])
    for scope, schema in layers:
        for key, field in schema.items():
            value = by_key.get((scope, key))
            if value is not None and field.secret and value.secret:
                secrets[key] = secret_name(toolset_id, scope, key)
            elif value is not None and not field.secret and not value.secret:
                out[key] = value.value
            elif field.default is not None:
                out[key] = field.default
            elif field.required:
                missing.append(key)
    return Plan(toolset_id, out, secrets, missing, frozenset(toolset_schema))


def status_of(provider: str, enabled: bool, missing: list[str]) -> ToolStatus:
    """``unavailable`` wins (the tool cannot run now: switched off, its toolset disabled, or its
    MCP server not connected), then ``system`` for built-ins, then ``available`` (installed, a
    required key has no value), else ``connected`` (ready)."""
    if not enabled:
        return "unavailable"
    if provider == "builtin":
        return "system"
    return "available" if missing else "connected"


def not_configured_message(tool: str, toolset_id: str, missing: list[str], where: dict[str, str | None]) -> str:
    """Says what is missing and the request that sets it; ``where``: key -> tool id inside the
    toolset (None for a toolset-level key)."""
    keys = ", ".join(missing)
    asks = []
    for scope in dict.fromkeys(where[k] for k in missing):
        names = {k: "..." for k in missing if where[k] == scope}
        target = f'"toolsetId": "{toolset_id}"' + (f', "toolId": "{scope}"' if scope else "")
        asks.append(f'config/set {{{target}, "values": {_brace(names)}}}')
    return f"the tool {tool} is not configured yet: {keys} {'has' if len(missing) == 1 else 'have'} no value; " \
           f"set {'it' if len(missing) == 1 else 'them'} with " + " and ".join(asks)


def _brace(names: dict[str, str]) -> str:
    return "{" + ", ".join(f'"{k}": {v}' for k, v in names.items()) + "}"

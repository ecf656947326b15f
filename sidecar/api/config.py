"""Per-tool configuration (seed 004): the fields a toolset and its tools declare in
``config_schema``, the values the user gives them (secret ones kept in the secret store and only
ever shown masked), and whether a tool has what it needs to run."""

from __future__ import annotations

from typing import Any

from .base import MethodSpec, Model
from .errors import ErrorCode
from .toolsets import ConfigField, ToolStatus


class ConfigScopeParams(Model):
    toolset_id: str
    # A tool of the toolset (its id inside it, or canonical toolset:tool) for that tool's own
    # fields; absent: the fields shared by the whole toolset.
    tool_id: str | None = None


class ConfigGetResult(Model):
    fields: list[ConfigField]
    # The tool's status (with toolId) or the toolset-level one: available while a required field
    # of the scope has no value, unavailable while the toolset is disabled, else connected.
    status: ToolStatus


class ConfigSetParams(Model):
    toolset_id: str
    # Field name -> value of the field's type; null removes that value. A secret that comes back
    # as "****" (what config/get showed) keeps the stored one; a secret's surrounding whitespace
    # (a pasted newline) is dropped.
    values: dict[str, Any]
    tool_id: str | None = None  # as in config/get


class ConfigDeleteParams(Model):
    toolset_id: str
    key: str
    tool_id: str | None = None  # as in config/get


class ConfigStatusResult(Model):
    status: ToolStatus  # as config/get says it, after the change


class ConfigTestResult(Model):
    ok: bool  # every required field the scope needs has a value (or a default)
    message: str  # "Configuration looks complete", or what is missing and how to set it
    # Required keys without a value; with toolId, the toolset-level ones the tool needs too.
    missing: list[str]


_NF, _IP, _CF, _ST = ErrorCode.NOT_FOUND, ErrorCode.INVALID_PARAMS, ErrorCode.CONFLICT, ErrorCode.STORAGE_ERROR

SPECS = (
    MethodSpec("config/get", "clientToServer", "request",
               "The config fields of a toolset (without toolId) or of one of its tools, each with its "
               "value (secret ones masked), and the status they give.",
               params=ConfigScopeParams, result=ConfigGetResult, errors=(_NF, _ST)),
    MethodSpec("config/set", "clientToServer", "request",
               "Set config values: each key must be a field of the scope and each value of its type "
               "(InvalidParams at params.values.<key> otherwise). Secret values go to the secret store, "
               "the others to the database. Conflict while the toolset is disabled: enable it first.",
               params=ConfigSetParams, result=ConfigStatusResult, errors=(_NF, _IP, _CF, _ST)),
    MethodSpec("config/delete", "clientToServer", "request",
               "Remove one config value (the tool gets the field's default again, if it has one).",
               params=ConfigDeleteParams, result=ConfigStatusResult, errors=(_NF, _IP, _CF, _ST)),
    MethodSpec("config/test", "clientToServer", "request",
               "Whether the scope's required fields all have a value; with toolId, the toolset-level "
               "fields the tool needs count too.",
               params=ConfigScopeParams, result=ConfigTestResult, errors=(_NF, _ST)),
)

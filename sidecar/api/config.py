"""Per-tool configuration (seed 004): the fields a toolset and its tools declare in
``config_schema``, the values the user gives them (secret ones kept in the secret store and only
ever shown masked), and whether a tool has what it needs to run."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from .base import MethodSpec, Model
from .errors import ErrorCode
from .tools import ToolStatus
from .toolsets import ConfigField

_TOOLSET = "The toolset (NotFound if unknown or deleted)."
_TOOL = ("A tool of the toolset, by its id inside it or canonical toolset:tool, for that tool's own fields "
         "(only Python tools have any; NotFound otherwise); absent: the fields shared by the whole toolset.")
_STATUS = ("With toolId, the tool's status as tools/get gives it; else the toolset's: 'unavailable' while it is "
           "disabled, 'available' while a required field has no value, else 'connected'.")


class ConfigScopeParams(Model):
    toolset_id: Annotated[str, msgspec.Meta(description=_TOOLSET)]
    tool_id: Annotated[str | None, msgspec.Meta(description=_TOOL)] = None


class ConfigGetResult(Model):
    fields: Annotated[list[ConfigField], msgspec.Meta(
        description="The scope's fields in declaration order, each with its value (secret ones as '****').")]
    status: Annotated[ToolStatus, msgspec.Meta(description=_STATUS)]


class ConfigSetParams(Model):
    toolset_id: Annotated[str, msgspec.Meta(description=_TOOLSET)]
    values: Annotated[dict[str, Any], msgspec.Meta(
        description="Field key -> a value of the field's type (a string at most 16384 characters); null removes "
                    "that value. Keys left out are unchanged. A secret sent back as '****' (what config/get "
                    "shows) keeps the stored one; a secret's surrounding whitespace is dropped and an empty one "
                    "is refused.")]
    tool_id: Annotated[str | None, msgspec.Meta(description=_TOOL)] = None


class ConfigDeleteParams(Model):
    toolset_id: Annotated[str, msgspec.Meta(description=_TOOLSET)]
    key: Annotated[str, msgspec.Meta(
        description="The field whose value to remove; must be a field of the scope (InvalidParams); a field "
                    "without a value is no error.")]
    tool_id: Annotated[str | None, msgspec.Meta(description=_TOOL)] = None


class ConfigStatusResult(Model):
    status: Annotated[ToolStatus, msgspec.Meta(description=_STATUS + " After the change.")]


class ConfigTestResult(Model):
    ok: Annotated[bool, msgspec.Meta(
        description="Whether every required field the scope needs has a value (or a default).")]
    message: Annotated[str, msgspec.Meta(
        description="'Configuration looks complete', or which keys are missing and how to set them, for the "
                    "user.")]
    missing: Annotated[list[str], msgspec.Meta(
        description="Required keys without a value (with toolId, the toolset-level ones the tool needs too), "
                    "and secret keys set before whose value the secret store no longer holds; empty when ok.")]


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

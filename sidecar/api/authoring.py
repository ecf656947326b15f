"""Toolsets and tools the user makes in the UI (seed 002): toolsets/create|update and an HTTP tool's
versions put, deleted and made current under a slug."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from .base import Empty, MethodSpec, Model
from .errors import ErrorCode
from .tools import ToolResult
from .toolsets import ToolsetResult

_NF, _CF, _IP, _ST = ErrorCode.NOT_FOUND, ErrorCode.CONFLICT, ErrorCode.INVALID_PARAMS, ErrorCode.STORAGE_ERROR

_SlugText = Annotated[str, msgspec.Meta(
    min_length=1, max_length=256,
    description="Unicode letters, digits and '-' (no '_', whitespace, '/', punctuation or symbols), "
                "at most 64 characters, case-sensitive.")]
_VersionText = Annotated[str, msgspec.Meta(
    min_length=1, max_length=256,
    description="An opaque label: Unicode letters, digits, '-' and '.', at most 64 characters.")]


class CreateToolsetParams(Model):
    id: Annotated[str, msgspec.Meta(description=(
        "1-64 letters, digits, '.', '_' and '-', starting with a letter or digit; Conflict if a toolset "
        "or MCP server has it."))]
    name: Annotated[str, msgspec.Meta(min_length=1, max_length=200, description="The name shown.")]
    description: Annotated[str, msgspec.Meta(max_length=4000, description="What its tools are for.")] = ""
    enabled: Annotated[bool, msgspec.Meta(description="Whether its tools are offered (default true).")] = True


class UpdateToolsetParams(Model):
    id: Annotated[str, msgspec.Meta(description="A toolset made with toolsets/create.")]
    name: Annotated[Annotated[str, msgspec.Meta(min_length=1, max_length=200)] | None, msgspec.Meta(
        description="The new name (absent: unchanged).")] = None
    description: Annotated[Annotated[str, msgspec.Meta(max_length=4000)] | None, msgspec.Meta(
        description="The new description (absent: unchanged).")] = None


class ToolDefinition(Model):
    """An HTTP tool as a toolset.yaml tool declares one (issue 13), with camelCase names."""

    http: Annotated[dict[str, Any], msgspec.Meta(description=(
        "The http block of a toolset.yaml tool: method and urlTemplate (or steps), query, headers, "
        "body or form, response, allowedHosts (required), outputSchema, timeout, maxRetries, "
        "maxCallsPerMinute, auth, ..."))]
    name: Annotated[str | None, msgspec.Meta(description="The name shown (default: the slug).")] = None
    description: Annotated[str | None, msgspec.Meta(description="What it does, for the user and models.")] = None
    input_schema: Annotated[dict[str, Any] | None, msgspec.Meta(description=(
        "JSON Schema of its arguments; ${name} in the http block is the argument name when declared here."))] = None
    requires_confirmation: Annotated[bool, msgspec.Meta(
        description="Ask the user before a model's call runs it.")] = False
    config_schema: Annotated[dict[str, Any], msgspec.Meta(description=(
        "Its own config fields (as toolset.yaml's config_schema: description, type, secret, required, "
        "default), set with config/set."))] = {}
    output: Annotated[dict[str, Any] | None, msgspec.Meta(description=(
        "What the result becomes (as toolset.yaml's output block: card, synthesize, ...)."))] = None
    tags: Annotated[list[str], msgspec.Meta(description="Free-text labels, 1-64 characters each, at most 32.")] = []


class PutToolParams(Model):
    toolset_id: Annotated[str, msgspec.Meta(description="A toolset made with toolsets/create.")]
    slug: _SlugText
    version: _VersionText
    definition: Annotated[ToolDefinition, msgspec.Meta(description="The HTTP tool this version is.")]


class ToolVersionParams(Model):
    toolset_id: Annotated[str, msgspec.Meta(description="The toolset holding the tool.")]
    slug: _SlugText
    version: _VersionText


SPECS = (
    MethodSpec("toolsets/create", "clientToServer", "request",
               "Make an empty toolset of your own (sourceType user) to put HTTP tools into with tools/put; "
               "it exports and re-imports like any other. Conflict if the id is taken.",
               params=CreateToolsetParams, result=ToolsetResult, errors=(_IP, _CF, _ST)),
    MethodSpec("toolsets/update", "clientToServer", "request",
               "Rename or redescribe a toolset made with toolsets/create (PermissionDenied for an imported "
               "one: its toolset.yaml says what it is).",
               params=UpdateToolsetParams, result=ToolsetResult,
               errors=(_NF, _IP, ErrorCode.PERMISSION_DENIED, _ST)),
    MethodSpec("tools/put", "clientToServer", "request",
               "Add an HTTP tool to a toolset made with toolsets/create under a new <slug, version>; it becomes "
               "the slug's current version. Conflict if the toolset has that pair already (the stored tool is "
               "left as it is) or is disabled; bad slug, version or definition: InvalidParams naming the field.",
               params=PutToolParams, result=ToolResult,
               errors=(_NF, _IP, _CF, ErrorCode.PERMISSION_DENIED, _ST)),
    MethodSpec("tools/delete", "clientToServer", "request",
               "Remove one version of a tool from a toolset made with toolsets/create, with its overrides; "
               "if it was current, the most recently put remaining version becomes current.",
               params=ToolVersionParams, result=Empty,
               errors=(_NF, _IP, _CF, ErrorCode.PERMISSION_DENIED, _ST)),
    MethodSpec("tools/setCurrent", "clientToServer", "request",
               "Make this version the one +slug means in its toolset (and the one chat turns offer). Tool ids "
               "do not change.",
               params=ToolVersionParams, result=ToolResult,
               errors=(_NF, _IP, _CF, ErrorCode.PERMISSION_DENIED, _ST)),
)

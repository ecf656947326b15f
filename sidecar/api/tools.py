"""Tools: what every provider's tools look like to the UI, how they are listed and overridden."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from .base import MethodSpec, Model
from .errors import ErrorCode
from .limits import ConstraintsSettings, SandboxSettings, ToolLimits
from .pages import NextPageToken, PageParams
from .render_plans import Renderer

_NF, _CF, _IP, _ST = ErrorCode.NOT_FOUND, ErrorCode.CONFLICT, ErrorCode.INVALID_PARAMS, ErrorCode.STORAGE_ERROR

# How many ids or tags one filter may list.
MAX_FILTER_IDS = 200
IdFilter = Annotated[list[str], msgspec.Meta(max_length=MAX_FILTER_IDS)]


class ToolIcon(Model):
    """An icon an MCP server gave for a tool (https or data:image URLs only; others are dropped)."""

    src: Annotated[str, msgspec.Meta(description="An https: URL or a data:image/... URL.")]
    mime_type: Annotated[str | None, msgspec.Meta(
        description="Its MIME type as the server gave it, e.g. 'image/png'; absent when not given.")] = None
    sizes: Annotated[list[str] | None, msgspec.Meta(
        description="The sizes it fits, e.g. '48x48' or 'any'; absent when not given.")] = None
    theme: Annotated[Literal["light", "dark"] | None, msgspec.Meta(
        description="The background it is drawn for, 'light' or 'dark'; absent: any.")] = None


# system: built in, nothing to configure; available: installed, a required config key has no
# value (calls fail fast naming it); connected: ready; unavailable: cannot run now (switched
# off, its toolset disabled, its MCP server not connected, or, with unavailableReason, its
# provider gone or its toolset deleted).
ToolStatus = Literal["system", "available", "connected", "unavailable"]


class Tool(Model):
    id: Annotated[str, msgspec.Meta(
        description="The canonical id: a built-in's name, toolset:tool, or mcp:toolset~server:tool.")]
    name: Annotated[str, msgspec.Meta(
        description="The name shown: an override's nameOverride, else the tool's own (an MCP tool's title when "
                    "the server gave one).")]
    description: Annotated[str, msgspec.Meta(
        description="What it does, for the user and the model: an override's descriptionOverride, else the "
                    "tool's own; may be empty.")]
    provider: Annotated[Literal["builtin", "python", "mcp", "http"], msgspec.Meta(
        description="What runs it: 'builtin' (part of the app), 'python' (a toolset's Python function), 'mcp' "
                    "(an MCP server) or 'http' (a declared HTTP request).")]
    requires_confirmation: Annotated[bool, msgspec.Meta(
        description="Whether a model's call asks the user first (ui/confirmToolCall), overrides applied; an MCP "
                    "tool's default follows its server and its annotations.")]
    enabled: Annotated[bool, msgspec.Meta(
        description="Whether it is offered and runs: false while an override, its toolset or its MCP server "
                    "switches it off, and whenever unavailableReason is set.")]
    input_schema: Annotated[dict[str, Any] | None, msgspec.Meta(
        description="The JSON Schema of its arguments (an object); absent when none is known.")] = None
    toolset_id: Annotated[str | None, msgspec.Meta(
        description="The toolset it belongs to; absent for built-ins.")] = None
    renderer: Annotated[str | None, msgspec.Meta(
        description="How its results are shown: code, document, html, frame or image (an override's, else the "
                    "manifest's); absent: by what the result holds (an MCP result's content), else raw.")] = None
    renderer_config: Annotated[dict[str, Any] | None, msgspec.Meta(
        description="The renderer's config as declared, $-expressions not yet filled (each call's renderPlan "
                    "has them filled); absent: none.")] = None
    status: Annotated[ToolStatus | None, msgspec.Meta(
        description="'system' (built in), 'available' (a required config key has no value: see "
                    "missingConfig), 'connected' (ready) or 'unavailable' (cannot run now: switched off, its "
                    "toolset disabled, or unavailableReason). Always set in answers.")] = None
    missing_config: Annotated[list[str], msgspec.Meta(
        description="The required config keys that have no value (status available): set them with "
                    "config/set.")] = []
    # Name shows it unless an override renames the tool.
    title: Annotated[str | None, msgspec.Meta(
        description="MCP tools: the title the server gave; absent otherwise.")] = None
    annotations: Annotated[dict[str, Any] | None, msgspec.Meta(
        description="MCP tools: the server's hints as it sent them (readOnlyHint, destructiveHint, "
                    "idempotentHint, openWorldHint, title); they set requiresConfirmation unless the server or "
                    "an override does. Absent when none.")] = None
    output_schema: Annotated[dict[str, Any] | None, msgspec.Meta(
        description="The JSON Schema every result is checked against (a result that does not fit fails with "
                    "errorKind badOutput naming the place): an MCP tool's outputSchema (for its "
                    "structuredContent), an HTTP tool's declared one, a Python tool's return annotation. Absent: "
                    "results are not checked.")] = None
    icons: Annotated[list[ToolIcon] | None, msgspec.Meta(
        description="MCP tools: the icons the server gave, for display; absent when none.")] = None
    slug: Annotated[str, msgspec.Meta(description=(
        "What the \"+\" palette calls it (+slug, +slug@version; chat/invokeTool takes either as toolId): "
        "Unicode letters, digits and '-', case-sensitive. A manifest tool that names none has its id's, "
        "'_' and '.' turned into '-'; an MCP tool has its name's, made valid the same way. Always set in "
        "answers."))] = ""
    version: Annotated[str, msgspec.Meta(description=(
        "An opaque label telling revisions of one slug apart (letters, digits, '-', '.'); \"1\" unless "
        "the tool names one. <slug, version> is unique within a toolset. Always set in answers."))] = ""
    current: Annotated[bool | None, msgspec.Meta(description=(
        "Whether this is the version +slug means among the toolset's versions of the slug; chat turns "
        "offer only current versions (tools/setCurrent picks another). Always set in answers."))] = None
    created_at: Annotated[str | None, msgspec.Meta(description=(
        "When the tool was first stored (ISO 8601 UTC); kept across upgrades that keep the tool. Absent "
        "for MCP tools, which are discovered live."))] = None
    modified_at: Annotated[str | None, msgspec.Meta(description=(
        "Its last structural change (definition or tags; a Python tool's code); switching it on or off "
        "or overriding it is not one; tools/search ranks the most recent first within a tier. Absent for "
        "MCP tools."))] = None
    tags: Annotated[list[str], msgspec.Meta(description=(
        "Free-text labels from its manifest or tools/put; tools/list filters on them (tags)."))] = []
    call_count: Annotated[int, msgspec.Meta(description=(
        "How many times the tool ran, from any chat, the palette, tools/call or a schedule, failed runs "
        "included; a call refused before it ran (tools switched off, confirmation denied, bad arguments, "
        "missing config) is not counted. Counted after the reply, so it may lag a call just answered by "
        "a moment; absent: 0. Shown by tools/list and tools/get."))] = 0
    last_called_at: Annotated[str | None, msgspec.Meta(description=(
        "When the latest counted call started (ISO 8601, UTC); absent if it never ran."))] = None
    unavailable_reason: Annotated[str | None, msgspec.Meta(description=(
        "Why the tool cannot run (status unavailable, enabled false) whatever its switches say: its provider went "
        "away (a Python module gone on reload, a tool its toolset no longer declares, an MCP tool its connected "
        "server no longer lists, a built-in not in this version of the app) or its toolset was deleted. Its "
        "override and past calls are kept; calling it is refused with this reason."))] = None
    overrides_applied: Annotated[list[str], msgspec.Meta(description=(
        "The overrides that set something on this tool, by the key or pattern each is stored under "
        "(toolset:tool, server:tool, fs:*, *:read_*): the exact one first, then the patterns, most "
        "specific first; absent: none."))] = []
    limits: Annotated[ToolLimits | None, msgspec.Meta(description=(
        "A Python tool's effective sandbox limits (seed 004), each value with where it came from "
        "(default, manifest, user); shown by tools/get and tools/list. Absent for tools that run in no process of "
        "their own (built-in file tools, HTTP and MCP tools)."))] = None


class ToolsListParams(PageParams, kw_only=True):
    # The tools a turn in this chat offers: the enabled ones plus what its active branch attached,
    # attached ones named as the chat shows them (<source>.<tool>); none while the user's kill
    # switch (settings toolsEnabled) is off.
    chat_id: Annotated[str | None, msgspec.Meta(description=(
        "The tools a turn in this chat offers (all of them, in the order the model gets them; no paging or "
        "filters with it)."))] = None
    include_disabled: Annotated[bool, msgspec.Meta(description="Disabled tools too (default: enabled only).")] = False
    toolset_ids: Annotated[IdFilter | None, msgspec.Meta(description=(
        "Only tools of these toolsets (ids; builtin names the built-in tools); absent: every toolset."))] = None
    tags: Annotated[IdFilter | None, msgspec.Meta(description=(
        "Only tools that have at least one of these tags; absent: any."))] = None


class ToolsResult(Model):
    tools: Annotated[list[Tool], msgspec.Meta(description=(
        "Without chatId: ordered by tool id (built-in, Python, HTTP and MCP tools merged in that one order), "
        "with callCount and lastCalledAt."))]
    next_page_token: NextPageToken = None


class ToolIdParams(Model):
    id: Annotated[str, msgspec.Meta(description="The tool's canonical id (NotFound if unknown).")]


class ToolResult(Model):
    tool: Annotated[Tool, msgspec.Meta(description="The tool, overrides applied.")]


_KEEP = " Absent: unchanged; null: the override of this field is removed (the tool's own value again)."


class SetOverrideParams(Model):
    toolset_id: Annotated[str, msgspec.Meta(
        description="The toolset of the tool ('builtin' for built-in tools, which take only enabled: "
                    "PermissionDenied for anything else). Conflict while it is disabled or deleted.")]
    # Patterns layer field by field, least specific first; the tool's exact override wins over them.
    tool_id: Annotated[str, msgspec.Meta(
        description="The tool: canonical (toolset:tool, mcp:toolset~server:tool) or its id inside the toolset; "
                    "or a pattern with * (any run of characters but ':') and ? (one character), matched against "
                    "toolset:tool and server:tool keys (fs:*, *:read_*), which applies to every matching tool "
                    "(an exact override wins over it).")]
    renderer: Annotated[Renderer | None | msgspec.UnsetType, msgspec.Meta(
        description="How its results are shown: code, document, html, frame or image." + _KEEP)] = msgspec.UNSET
    renderer_config: Annotated[dict[str, Any] | None | msgspec.UnsetType, msgspec.Meta(
        description="The renderer's config ($-expressions filled per call)." + _KEEP)] = msgspec.UNSET
    name_override: Annotated[str | None | msgspec.UnsetType, msgspec.Meta(
        description="The name to show instead of the tool's own (an empty one shows the tool's own)."
                    + _KEEP)] = msgspec.UNSET
    description_override: Annotated[str | None | msgspec.UnsetType, msgspec.Meta(
        description="The description to give instead of the tool's own (an empty one gives the tool's own)."
                    + _KEEP)] = msgspec.UNSET
    requires_confirmation: Annotated[bool | None | msgspec.UnsetType, msgspec.Meta(
        description="Whether a model's call asks the user first." + _KEEP)] = msgspec.UNSET
    enabled: Annotated[bool | None | msgspec.UnsetType, msgspec.Meta(
        description="false switches the tool off (not offered, not run); true switches it back on." + _KEEP)] = (
        msgspec.UNSET)
    constraints: Annotated[ConstraintsSettings | None | msgspec.UnsetType, msgspec.Meta(description=(
        "A Python tool's constraints (seed 004: timeoutSeconds), winning over its manifest's and the "
        "toolset's (toolsets/setLimits); a key absent keeps its value, a null key or a null block removes "
        "the user's value. One tool only: not with a pattern."))] = msgspec.UNSET
    sandbox: Annotated[SandboxSettings | None | msgspec.UnsetType, msgspec.Meta(description=(
        "A Python tool's sandbox settings (seed 004: memory, network, allowedHosts, writable, processes, "
        "disk), winning as constraints does; tools/get shows the effective limits. One tool only."))] = (
        msgspec.UNSET)


class SetOverrideResult(Model):
    tool: Annotated[Tool | None, msgspec.Meta(
        description="The tool as it is now, when toolId named one tool; absent for a pattern.")] = None
    matched: Annotated[list[Tool] | None, msgspec.Meta(
        description="For a pattern: every tool of the toolset it now sets something on (empty when it matches "
                    "none yet); absent when one tool was named.")] = None


_TOOL_SPECS = (
    MethodSpec("tools/list", "clientToServer", "request",
               "Tools with overrides applied and their usage, by id a page at a time (pageSize, pageToken), "
               "filtered by toolsetIds and tags (disabled ones only with includeDisabled); with chatId, "
               "the tools that chat's turns offer, attachments included, under the names it shows.",
               params=ToolsListParams, result=ToolsResult, errors=(_NF, _IP, _ST),
               seed_endpoints=("list_tools", "get_available_tools")),
    MethodSpec("tools/get", "clientToServer", "request",
               "One tool by canonical id, overrides applied, with its usage (callCount, lastCalledAt).",
               params=ToolIdParams, result=ToolResult, errors=(_NF, _ST), seed_endpoints=("get_tool",)),
    MethodSpec("tools/setOverride", "clientToServer", "request",
               "Change how a tool appears and behaves (renderer, name, description, confirmation, "
               "enabled) without touching its provider; kept across toolset upgrades. A toolId with * or ? "
               "is a pattern applying to every matching tool of the toolset (an exact override wins); "
               "InvalidParams for a malformed pattern. Conflict while its toolset is disabled: enable the "
               "toolset first.",
               params=SetOverrideParams, result=SetOverrideResult,
               errors=(_NF, _IP, _CF, ErrorCode.PERMISSION_DENIED, _ST)),
)

SPECS = _TOOL_SPECS

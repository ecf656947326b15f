"""Toolsets: bundles of tools from Python modules and MCP servers (toolset.yaml + ZIP)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from .base import Empty, MethodSpec, Model
from .errors import ErrorCode
from .limits import ConstraintsSettings, LimitWarning, SandboxSettings, ToolLimits
from .mcp import ServerSandbox
from .pages import NextPageToken, PageParams
from .render_plans import Renderer, RenderPlan

_UTC = "ISO 8601 UTC ('2026-01-02T03:04:05.678901Z')"


class InspectParams(Model):
    path: Annotated[str, msgspec.Meta(
        description="Absolute path of a bundle .zip file or of a folder holding toolset.yaml.")]


class ManifestInfo(Model):
    id: Annotated[str, msgspec.Meta(description="The toolset id the bundle declares (what it installs as).")]
    name: Annotated[str, msgspec.Meta(description="Its name, as toolset.yaml gives it.")]
    version: Annotated[str, msgspec.Meta(
        description="Its version, as toolset.yaml gives it (free text); '0.0.0' when it names none.")]
    description: Annotated[str, msgspec.Meta(description="Its description; empty when none.")]
    manifest_version: Annotated[str, msgspec.Meta(
        description="The toolset.yaml format version it declares (manifest_version); '1' today.")]


class ConfigField(Model):
    """One field of a config_schema with its current value."""

    key: Annotated[str, msgspec.Meta(description="The field's name: the key config/set takes.")]
    description: Annotated[str, msgspec.Meta(description="What it is for, as the manifest says; may be empty.")]
    type: Annotated[Literal["string", "number", "integer", "boolean"], msgspec.Meta(
        description="The type its value must have: 'string', 'number', 'integer' or 'boolean'.")]
    secret: Annotated[bool, msgspec.Meta(
        description="Whether its value is kept in the secret store and shown only as '****'.")]
    required: Annotated[bool, msgspec.Meta(
        description="Whether the tools need a value (or a default) to run; a missing one makes them 'available' "
                    "and their calls fail naming it.")]
    value: Annotated[Any, msgspec.Meta(
        description="The value set, of the field's type; '****' for a secret that is set. Absent when nothing is "
                    "set, and always in toolsets/inspect.")] = None
    default: Annotated[Any, msgspec.Meta(
        description="What the tool gets while no value is set; absent: no default.")] = None
    is_set: Annotated[bool, msgspec.Meta(
        description="Whether a value is set (else the tool gets the default, if any); absent: false.")] = False


class InspectedTool(Model):
    id: Annotated[str, msgspec.Meta(description="The canonical id it would get: toolset:tool.")]
    name: Annotated[str, msgspec.Meta(description="Its name (the tool's id inside the toolset when none is given).")]
    description: Annotated[str, msgspec.Meta(description="What it does; empty when the manifest gives nothing.")]
    requires_confirmation: Annotated[bool, msgspec.Meta(
        description="Whether a model's call of it will ask the user first (ui/confirmToolCall).")]
    entrypoint: Annotated[str | None, msgspec.Meta(
        description="A Python tool's function, 'module:function'; absent for an HTTP tool.")] = None
    request: Annotated[str | None, msgspec.Meta(
        description="An HTTP tool's first request as declared, 'GET https://api.example.com/items/${id}'; absent "
                    "for a Python tool.")] = None
    renderer: Annotated[str | None, msgspec.Meta(
        description="The renderer the manifest's overrides give it (code, document, html, frame, image); absent: "
                    "none.")] = None
    timeout: Annotated[float | None, msgspec.Meta(
        description="Its timeout in seconds as the tool declares it; absent: the defaults apply.")] = None
    config_schema: Annotated[list[ConfigField], msgspec.Meta(
        description="The tool's own config fields (seed 004), to set with config/set toolId after install.")] = []
    schedule: Annotated[str | None, msgspec.Meta(description=(
        "Its cron trigger (five fields): installing puts the tool on this schedule (schedules/list shows "
        "it, source manifest), running by itself with no chat until the user gives it one."))] = None
    limits: Annotated[ToolLimits | None, msgspec.Meta(description=(
        "A Python tool's limits as the manifest would set them (the user's settings may change them after "
        "install), each value with its source."))] = None
    limit_warnings: Annotated[list[LimitWarning], msgspec.Meta(description=(
        "What the manifest lets this tool do beyond seed 004's defaults (network, writable folders, more "
        "memory, processes or time); each is also one of the bundle's warnings."))] = []


_SECRET_MAP = "a value that looks secret shows as '****', a ${VAR} reference as is"


class InspectedServer(Model):
    id: Annotated[str, msgspec.Meta(description="The server's id in the toolset (its key will be toolset~id).")]
    type: Annotated[Literal["stdio", "sse", "streamable-http"], msgspec.Meta(
        description="How it is reached: 'stdio' (a command the sidecar starts), 'sse' or 'streamable-http' (a "
                    "URL).")]
    command: Annotated[list[str] | None, msgspec.Meta(
        description="stdio: what would run, the command then its arguments, secrets masked; absent for URL "
                    "servers.")] = None
    url: Annotated[str | None, msgspec.Meta(
        description="sse / streamable-http: the URL, secrets in it masked; absent for stdio.")] = None
    cwd: Annotated[str | None, msgspec.Meta(
        description="stdio: the working directory as declared; absent: not set.")] = None
    env: Annotated[dict[str, str], msgspec.Meta(
        description="stdio: environment variables it would get; " + _SECRET_MAP + ".")] = {}
    headers: Annotated[dict[str, str], msgspec.Meta(
        description="URL servers: HTTP headers it would be sent; " + _SECRET_MAP + ".")] = {}
    sandbox: Annotated[ServerSandbox | None, msgspec.Meta(description=(
        "A stdio server that will run in the OS sandbox (mcp_servers[].sandbox, sizes in bytes; {}: seed "
        "004's defaults). Absent: it will run unconfined, with the user's own rights."))] = None
    limit_warnings: Annotated[list[LimitWarning], msgspec.Meta(description=(
        "What its sandbox lets this server do beyond seed 004's defaults (network, writable folders, more "
        "memory or processes); each is also one of the bundle's warnings."))] = []


class BundleFile(Model):
    path: Annotated[str, msgspec.Meta(description="The file's path inside the bundle, '/'-separated.")]
    kind: Annotated[Literal["python", "artifact", "asset", "config"], msgspec.Meta(
        description="'python' (a .py file), 'artifact' (under artifacts/, e.g. an html renderer's page), "
                    "'config' (a .yaml, .yml, .json or .toml file at the top) or 'asset' (anything else).")]
    size: Annotated[int, msgspec.Meta(description="Its size in bytes.")]


class BundleVariable(Model):
    """A ``${NAME}`` the bundle's MCP servers refer to: an exported secret, for the user to give again."""

    name: Annotated[str, msgspec.Meta(description="The variable (set it with secrets/set under this name).")]
    set: Annotated[bool, msgspec.Meta(
        description="Whether the secret store or the app's environment has it now; a server whose "
                    "variable is not set waits in error until it is.")]
    used_by: Annotated[list[str], msgspec.Meta(description="The ids of the bundle's servers that refer to it.")]


class InspectResult(Model):
    manifest: Annotated[ManifestInfo, msgspec.Meta(description="What toolset.yaml says the toolset is.")]
    source_type: Annotated[Literal["zip", "local"], msgspec.Meta(
        description="'zip' (a .zip file) or 'local' (a folder: installed, it follows edits of that folder).")]
    tools: Annotated[list[InspectedTool], msgspec.Meta(
        description="The tools it declares, in manifest order.")]
    mcp_servers: Annotated[list[InspectedServer], msgspec.Meta(
        description="The MCP servers it declares, in manifest order, with what each would run or reach.")]
    files: Annotated[list[BundleFile], msgspec.Meta(description="Every file of the bundle, sorted by path.")]
    warnings: Annotated[list[str], msgspec.Meta(
        description="Things the user should know before installing, worded for them: the bundle's own warnings, "
                    "then what tools and servers may do beyond seed 004's defaults.")]
    # An API key, an endpoint.
    config_schema: Annotated[list[ConfigField], msgspec.Meta(
        description="The config fields the whole toolset asks for, to set after install with config/set.")] = []
    variables: Annotated[list[BundleVariable], msgspec.Meta(
        description="Every ${NAME} its MCP servers refer to (an export writes a secret as one), in "
                    "order: ask the user for each that is not set.")] = []


_INSPECT_SPECS = (
    MethodSpec(
        "toolsets/inspect", "clientToServer", "request",
        "Read a toolset bundle (ZIP or folder) and show what installing it would add, including "
        "the commands its MCP servers would run; installs and runs nothing.",
        params=InspectParams, result=InspectResult,
        errors=(ErrorCode.INVALID_BUNDLE, ErrorCode.INVALID_PARAMS),
    ),
)


class Toolset(Model):
    id: Annotated[str, msgspec.Meta(description="The toolset's id; its tools' ids start with it (toolset:tool).")]
    name: Annotated[str, msgspec.Meta(description="The name shown.")]
    version: Annotated[str, msgspec.Meta(
        description="Its version as its toolset.yaml gives it (free text; '0.0.0' when it names none, and for one "
                    "made in the app).")]
    description: Annotated[str, msgspec.Meta(description="What its tools are for; may be empty.")]
    enabled: Annotated[bool, msgspec.Meta(
        description="Whether its tools are offered and run (toolsets/setEnabled); a disabled toolset also "
                    "refuses changes inside it.")]
    user_mcp: Annotated[bool, msgspec.Meta(
        description="Whether mcpServers/add made it to hold a user's MCP server (show it under \"MCP "
                    "servers\"), not an import or toolsets/create.")]
    source_type: Annotated[Literal["zip", "local", "url", "user"], msgspec.Meta(
        description="Where it came from: 'zip' (a .zip file), 'local' (a folder it follows), 'url' (a downloaded "
                    "ZIP, see toolsets/checkUpdate) or 'user' (made in the app: toolsets/create or "
                    "mcpServers/add).")]
    installed_at: Annotated[str, msgspec.Meta(
        description="When it was first installed or created, " + _UTC + "; upgrades keep it (as createdAt).")]
    source_ref: Annotated[str | None, msgspec.Meta(
        description="The .zip file or folder it was installed from, or the URL for source url; absent for "
                    "source user.")] = None
    soft_deleted_at: Annotated[str | None, msgspec.Meta(description=(
        "When toolsets/delete hid it (UTC): it, its tools and its MCP servers are out of every list, chat and "
        "schedule until toolsets/restore brings them back as they were; removed for good once deleted longer "
        "than the retention (2 days unless the app set another). Absent while it is live."))] = None
    created_at: Annotated[str | None, msgspec.Meta(description=(
        "When the toolset was first installed or created (ISO 8601 UTC); never changes, upgrades included."))] = None
    modified_at: Annotated[str | None, msgspec.Meta(description=(
        "Its last structural change: an upgrade or reload, toolsets/update, tools/put or tools/delete "
        "(switching it on or off is not one)."))] = None


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


class ConfiguredServer(Model):
    id: Annotated[str, msgspec.Meta(description="The server's key: toolset~server.")]
    server_id: Annotated[str, msgspec.Meta(description="Its id inside the toolset.")]
    toolset_id: Annotated[str, msgspec.Meta(description="The toolset that declares it.")]
    type: Annotated[Literal["stdio", "sse", "streamable-http"], msgspec.Meta(
        description="'stdio' (a command the sidecar starts), 'sse' or 'streamable-http' (a URL).")]
    enabled: Annotated[bool, msgspec.Meta(description="Whether the server itself is switched on.")]
    command: Annotated[list[str] | None, msgspec.Meta(
        description="stdio: the command then its arguments, secrets masked; absent for URL servers.")] = None
    url: Annotated[str | None, msgspec.Meta(
        description="sse / streamable-http: the URL, secrets in it masked; absent for stdio.")] = None
    sandbox: Annotated[ServerSandbox | None, msgspec.Meta(description=(
        "A stdio server's OS sandbox (sizes in bytes; {}: seed 004's defaults); absent: it runs unconfined "
        "(mcpServers/list shows what confines it now)."))] = None


class ImportParams(Model):
    path: Annotated[str | None, msgspec.Meta(
        description="Absolute path of a bundle .zip file or a folder holding toolset.yaml. Give path or url.")] = None
    replace: Annotated[bool, msgspec.Meta(
        description="Upgrade an installed toolset of the same id in place, keeping the user's overrides, "
                    "switches and config; false (the default): Conflict when the id is taken.")] = False
    url: Annotated[str | None, msgspec.Meta(description=(
        "The https:// address of a bundle ZIP to download and install (plain http only from this machine: "
        "127.0.0.1, localhost). Redirects are followed while they stay on https and public addresses; no "
        "credentials in it (it is kept as the toolset's sourceRef). Give path or url."))] = None
    sha256: Annotated[str | None, msgspec.Meta(description=(
        "With url: the ZIP's expected sha256 (64 hex digits); a download that differs is refused "
        "(InvalidParams at params.sha256) and nothing is installed."))] = None
    work_done_token: Annotated[int | str | None, msgspec.Meta(description=(
        "With url: the download's progress is reported as $/progress with this token "
        "(percentage when the server gives the size)."))] = None


# How many ids or tags one filter may list.
MAX_FILTER_IDS = 200
_Filter = Annotated[list[str], msgspec.Meta(max_length=MAX_FILTER_IDS)]


class ToolsetResult(Model):
    toolset: Annotated[Toolset, msgspec.Meta(description="The toolset as it is now.")]
    limit_warnings: Annotated[list[LimitWarning], msgspec.Meta(description=(
        "toolsets/import: what its tools may do beyond seed 004's defaults now, as toolsets/inspect "
        "showed before install (the user's settings included on a replace)."))] = []


class ListToolsetsParams(PageParams, kw_only=True):
    toolset_ids: Annotated[_Filter | None, msgspec.Meta(description=(
        "Only these toolsets (ids); absent: all."))] = None
    include_disabled: Annotated[bool, msgspec.Meta(description=(
        "Disabled toolsets too; default true, so a toolset manager can show and enable them (false: enabled "
        "ones only)."))] = True
    include_deleted: Annotated[bool, msgspec.Meta(description=(
        "Soft-deleted toolsets too (each with softDeletedAt), e.g. for a trash view offering "
        "toolsets/restore."))] = False


class ToolsetsResult(Model):
    toolsets: Annotated[list[Toolset], msgspec.Meta(description="By name, then id.")]
    next_page_token: NextPageToken = None


class ToolsetIdParams(Model):
    id: Annotated[str, msgspec.Meta(description="The toolset (NotFound if unknown).")]


class ToolsetDetail(Model):
    toolset: Annotated[Toolset, msgspec.Meta(description="The toolset.")]
    tools: Annotated[list[Tool], msgspec.Meta(
        description="Its Python and HTTP tools in manifest order, overrides applied, switched-off and "
                    "unavailable ones included. Not its MCP servers' tools: those are live (tools/list "
                    "toolsetIds).")]
    mcp_servers: Annotated[list[ConfiguredServer], msgspec.Meta(
        description="Its MCP servers' configuration, in manifest order.")]


class ExportParams(Model):
    id: Annotated[str, msgspec.Meta(description="The toolset (NotFound if unknown; Conflict if deleted).")]
    path: Annotated[str, msgspec.Meta(
        description="Absolute path of the .zip to write, in an existing folder (InvalidParams otherwise); a "
                    "file there is replaced.")]


class ExportResult(Model):
    path: Annotated[str, msgspec.Meta(description="The file written.")]
    size: Annotated[int, msgspec.Meta(description="Its size in bytes.")]
    sha256: Annotated[str, msgspec.Meta(description="SHA-256 of the file, 64 lowercase hex digits.")]
    variables: Annotated[list[str], msgspec.Meta(
        description="The ${NAME} placeholders the export's MCP servers refer to (secrets written as "
                    "placeholders among them): what whoever imports it is asked for.")] = []


class SetEnabledParams(Model):
    id: Annotated[str, msgspec.Meta(description="The toolset (NotFound if unknown; Conflict if deleted).")]
    enabled: Annotated[bool, msgspec.Meta(
        description="true: its tools are offered and run again; false: all hidden, changes inside it refused.")]


_IB, _NF, _CF, _IP, _ST = (ErrorCode.INVALID_BUNDLE, ErrorCode.NOT_FOUND, ErrorCode.CONFLICT,
                           ErrorCode.INVALID_PARAMS, ErrorCode.STORAGE_ERROR)

_TOOLSET_SPECS = (
    MethodSpec("toolsets/import", "clientToServer", "request",
               "Install a toolset from a ZIP file or a folder (path), or from a ZIP downloaded over https "
               "(url, optionally pinned by sha256; sourceType url, sourceRef the URL, see "
               "toolsets/checkUpdate). Conflict if its id is installed, unless replace is set. A refused "
               "destination (a redirect to file:, to plain http or to a private address) is PermissionDenied; "
               "a server that cannot be reached or answers an error is UpstreamError; a body over the size "
               "limit or that is not a bundle ZIP is InvalidBundle.",
               params=ImportParams, result=ToolsetResult,
               errors=(_IB, _CF, _IP, ErrorCode.PERMISSION_DENIED, ErrorCode.UPSTREAM_ERROR, _ST),
               seed_endpoints=("import_toolset",)),
    MethodSpec("toolsets/list", "clientToServer", "request",
               "Installed toolsets by name, a page at a time (pageSize, pageToken), optionally only some "
               "(toolsetIds) or only enabled ones (includeDisabled false); soft-deleted ones only with "
               "includeDeleted.",
               params=ListToolsetsParams, result=ToolsetsResult, errors=(_IP, _ST),
               seed_endpoints=("list_toolsets",)),
    MethodSpec("toolsets/get", "clientToServer", "request",
               "A toolset with its tools (overrides applied) and its MCP server configuration; a soft-deleted "
               "one too (softDeletedAt set, its tools unavailable), so the UI can offer toolsets/restore.",
               params=ToolsetIdParams, result=ToolsetDetail, errors=(_NF, _ST),
               seed_endpoints=("get_toolset",)),
    MethodSpec("toolsets/export", "clientToServer", "request",
               "Write the toolset as a ZIP: toolset.yaml regenerated from the database with every "
               "secret replaced by a ${VAR} placeholder, plus its files.",
               params=ExportParams, result=ExportResult, errors=(_NF, _CF, _IP, _ST),
               seed_endpoints=("export_toolset",)),
    MethodSpec("toolsets/setEnabled", "clientToServer", "request",
               "Turn a whole toolset on or off (a disabled toolset hides all its tools, and refuses changes "
               "inside it with Conflict until it is enabled again). Conflict for a soft-deleted one.",
               params=SetEnabledParams, result=ToolsetResult, errors=(_NF, _CF, _ST),
               seed_endpoints=("enable_toolset",)),
    MethodSpec("toolsets/uninstall", "clientToServer", "request",
               "Remove a toolset now and for good (a soft-deleted one too): its files, rows, overrides and MCP "
               "servers.",
               params=ToolsetIdParams, result=Empty, errors=(_NF, _ST),
               seed_endpoints=("uninstall_toolset",)),
    MethodSpec("toolsets/delete", "clientToServer", "request",
               "Soft-delete a toolset (seed 002): it, its tools and its MCP servers leave every list, chat, palette "
               "and schedule (its servers disconnect, its schedules pause), and every change inside it is refused "
               "(Conflict), until toolsets/restore brings it all back as it was; kept that way for the retention "
               "(2 days unless the app set another), then removed for good. Conflict when already deleted.",
               params=ToolsetIdParams, result=ToolsetResult, errors=(_NF, _CF, _ST)),
    MethodSpec("toolsets/restore", "clientToServer", "request",
               "Bring back a soft-deleted toolset with its switches, overrides, config, secrets and MCP servers "
               "as they were (its paused schedules resume). Conflict when it is not deleted.",
               params=ToolsetIdParams, result=ToolsetResult, errors=(_NF, _CF, _ST)),
)


class ToolsListParams(PageParams, kw_only=True):
    # The tools a turn in this chat offers: the enabled ones plus what its active branch attached,
    # attached ones named as the chat shows them (<source>.<tool>); none while the user's kill
    # switch (settings toolsEnabled) is off.
    chat_id: Annotated[str | None, msgspec.Meta(description=(
        "The tools a turn in this chat offers (all of them, in the order the model gets them; no paging or "
        "filters with it)."))] = None
    include_disabled: Annotated[bool, msgspec.Meta(description="Disabled tools too (default: enabled only).")] = False
    toolset_ids: Annotated[_Filter | None, msgspec.Meta(description=(
        "Only tools of these toolsets (ids; builtin names the built-in tools); absent: every toolset."))] = None
    tags: Annotated[_Filter | None, msgspec.Meta(description=(
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


class ClientContext(Model):
    """Where and when the user is, as the UI knows it; a Python tool reads it as
    get_context().telemetry (seed 004), every field present there, null when not given."""

    time: Annotated[Annotated[str, msgspec.Meta(max_length=64)] | None, msgspec.Meta(
        description="The user's current time, ISO 8601 (at most 64 characters); absent: the "
                    "sidecar's clock in UTC ('2026-01-02T03:04:05Z').")] = None
    timezone: Annotated[Annotated[str, msgspec.Meta(max_length=64)] | None, msgspec.Meta(
        description="The user's IANA time zone, e.g. 'Europe/Malta' (at most 64 characters); absent: the "
                    "sidecar's own when it can tell, else null.")] = None
    locale: Annotated[Annotated[str, msgspec.Meta(max_length=64)] | None, msgspec.Meta(
        description="The user's locale, a BCP 47 tag such as 'en-MT' (at most 64 characters); absent: null.")] = None
    language: Annotated[Annotated[str, msgspec.Meta(max_length=64)] | None, msgspec.Meta(
        description="The user's language, a BCP 47 tag such as 'en-US' (at most 64 characters); absent: "
                    "null.")] = None
    lat: Annotated[Annotated[float, msgspec.Meta(ge=-90, le=90)] | None, msgspec.Meta(
        description="The user's latitude in decimal degrees, -90 to 90; absent: null.")] = None
    lon: Annotated[Annotated[float, msgspec.Meta(ge=-180, le=180)] | None, msgspec.Meta(
        description="The user's longitude in decimal degrees, -180 to 180; absent: null.")] = None
    city: Annotated[Annotated[str, msgspec.Meta(max_length=200)] | None, msgspec.Meta(
        description="The user's city, as the UI names it (at most 200 characters); absent: null.")] = None
    country: Annotated[Annotated[str, msgspec.Meta(max_length=200)] | None, msgspec.Meta(
        description="The user's country, as the UI names it (at most 200 characters); absent: null.")] = None


class ToolCallParams(Model):
    tool_id: Annotated[str, msgspec.Meta(description=(
        "The canonical id, as tools/list gives it, or +slug / +slug@version as chat/invokeTool takes it."))]
    args: Annotated[dict[str, Any], msgspec.Meta(
        description="The tool's arguments, checked against its input schema first (InvalidParams naming the "
                    "field); default {}.")] = {}
    chat_id: Annotated[str | None, msgspec.Meta(
        description="The chat whose workspace the tool works in (NotFound if unknown), snapshotted after the "
                    "call; absent: no chat (a Python tool gets a scratch folder that is dropped after).")] = None
    work_done_token: Annotated[int | str | None, msgspec.Meta(
        description="When given, progress the tool reports (MCP tools do) comes as $/progress 'report's with "
                    "this token.")] = None
    client_context: Annotated[ClientContext | None, msgspec.Meta(
        description="The user's time, place and language for this call (a Python tool's "
                    "get_context().telemetry); absent: as if every field were left out.")] = None


class SentRequest(Model):
    method: Annotated[str, msgspec.Meta(description="The HTTP method.")]
    url: Annotated[str, msgspec.Meta(description="The URL as sent, every secret value in it masked (****).")]
    status: Annotated[int | None, msgspec.Meta(description=(
        "The final status (after retries and a followed redirect); absent when no answer came (refused, "
        "timed out, connection failed)."))] = None
    duration_ms: Annotated[float, msgspec.Meta(description="From the first attempt to the end of the answer.")] = 0.0


StartedBy = Literal["model", "palette", "api", "schedule"]
Confirmation = Literal["notNeeded", "userOnce", "userChat", "userAlways", "userDenied", "chatGrant",
                       "alwaysGrant", "schedule"]
_STARTED_BY = ("Who started the call: model (a model's tool call in a chat turn), palette (chat/invokeTool, "
               "the \"+\" palette), api (tools/call), schedule (a schedule ran it; scheduleId says which).")
_CONFIRMATION = (
    "How the call came to run, or not, where a confirmation applies (model and schedule calls): notNeeded "
    "(the tool requires none), userOnce / userChat / userAlways (the user allowed this call when asked, "
    "once / for the chat / always), userDenied (the user denied it), chatGrant / alwaysGrant (an earlier "
    "\"allow for this chat\" / \"always\" answer let it run without asking), schedule (the schedule allows "
    "it to run unattended). Absent when the user started the call themselves (palette, tools/call), and for "
    "a model's call refused before any question (unknown tool, bad arguments, the UI could not be asked).")


class ToolCall(Model):
    id: Annotated[str, msgspec.Meta(description="The call's id (a UUIDv7).")]
    tool_id: Annotated[str, msgspec.Meta(
        description="The canonical id of the tool called; for a model's call of a tool that does not exist, "
                    "the name the model used.")]
    args: Annotated[dict[str, Any], msgspec.Meta(
        description="The arguments it ran with (the user's edited ones when they changed them on "
                    "confirmation); {} when a model's arguments were not a JSON object.")]
    status: Annotated[Literal["pending", "running", "success", "error"], msgspec.Meta(
        description="'running', 'success' or 'error' (errorKind says why). 'pending' is never sent today. A call "
                    "still running when the sidecar stopped becomes error (errorKind interrupted) at the next "
                    "start.")]
    started_at: Annotated[str, msgspec.Meta(description="When it started (or was refused), " + _UTC + ".")]
    started_by: Annotated[StartedBy, msgspec.Meta(description=_STARTED_BY)]
    chat_id: Annotated[str | None, msgspec.Meta(
        description="The chat it ran in; absent for a call outside any chat (tools/call without chatId, a "
                    "schedule with no chat).")] = None
    message_id: Annotated[str | None, msgspec.Meta(
        description="The message it belongs to: a turn's assistant message or a palette run's tool message; "
                    "absent otherwise.")] = None
    result: Annotated[Any, msgspec.Meta(
        description="What the tool returned: a Python tool's return value, an MCP CallToolResult object, an "
                    "HTTP tool's response as declared. Also on some failures (what the tool left, e.g. an MCP "
                    "result with isError). Absent while running and when there is none.")] = None
    error: Annotated[str | None, msgspec.Meta(
        description="Why it failed, for the user and the model (secrets scrubbed); absent unless status is "
                    "error.")] = None
    error_kind: Annotated[str | None, msgspec.Meta(
        description="Why it failed, as a word: e.g. arguments, raised, timeout, crashed, memory, disk, output, "
                    "badOutput, server (an MCP tool's isError), upstream, refused, rate_limited, load, cancelled, "
                    "killed (tools switched off), interrupted (the sidecar stopped); for a model's call refused "
                    "before it ran also unknown_tool, denied, unavailable, unconfigured (the model is told which "
                    "keys) and tools_off. Absent unless status is error.")] = None
    render_plan: Annotated[RenderPlan | None, msgspec.Meta(
        description="How to show the result, told apart by renderer; absent: no renderer applies (show the raw "
                    "result), and while running.")] = None
    pre_manifest_id: Annotated[str | None, msgspec.Meta(
        description="In a chat: the workspace version the call started from; absent outside a chat, for a call "
                    "refused before it ran, or while the workspace never held a file.")] = None
    post_manifest_id: Annotated[str | None, msgspec.Meta(
        description="In a chat: the workspace version after the call (a new tool_run version when it changed "
                    "files, else the same as preManifestId); absent while running, outside a chat, for a call "
                    "refused before it ran, or while the workspace holds no file.")] = None
    finished_at: Annotated[str | None, msgspec.Meta(
        description="When it ended, " + _UTC + "; absent while running.")] = None
    requests: Annotated[list[SentRequest] | None, msgspec.Meta(description=(
        "HTTP tools: the requests the call made, in order (steps and failed ones included), secrets masked."))] = None
    duration_ms: Annotated[float | None, msgspec.Meta(description=(
        "How long the call ran, in milliseconds, from its start (after waiting for the chat's workspace) to "
        "its end, the workspace snapshot included; absent while it runs and for a call refused before it "
        "ran."))] = None
    schedule_id: Annotated[str | None, msgspec.Meta(
        description="The schedule that ran it (startedBy schedule).")] = None
    confirmation: Annotated[Confirmation | None, msgspec.Meta(description=_CONFIRMATION)] = None
    toolset_id: Annotated[str | None, msgspec.Meta(description=(
        "The toolset the tool belonged to when it ran (kept after the toolset is gone); absent for built-ins "
        "and a call of an unknown tool."))] = None
    provider: Annotated[str | None, msgspec.Meta(description=(
        "What ran the tool: builtin, python, mcp or http; absent for a call of an unknown tool."))] = None


class ToolCallResult(Model):
    tool_call: Annotated[ToolCall, msgspec.Meta(
        description="The call as it ended; a tool that ran and failed answers here too, with status error.")]


_CALL_SPECS = (
    MethodSpec("tools/call", "clientToServer", "request",
               "Run one tool now, as the user (no confirmation is asked). With chatId it runs in "
               "that chat's workspace, which is snapshotted after the call, even a failed one. A "
               "tool that runs and fails still answers with its toolCall (status error, errorKind "
               "says why); bad arguments are InvalidParams before anything runs, and a tool whose "
               "status is available (required config missing) is Conflict (reason \"not configured\", "
               "data.missing names the keys) before anything runs.",
               params=ToolCallParams, result=ToolCallResult,
               errors=(_NF, _IP, _CF, _ST), cancel="interrupt"),
)


class ToolsetChangedParams(Model):
    id: Annotated[str, msgspec.Meta(description="The toolset (sourceType local) whose folder was edited.")]
    change: Annotated[Literal["reloaded", "reloadFailed"], msgspec.Meta(
        description="'reloaded': the saved edit is live; 'reloadFailed': it was rejected and the last good "
                    "version keeps serving (error and errorPath say what to fix).")]
    toolset: Annotated[Toolset | None, msgspec.Meta(
        description="With reloaded: the toolset as it is now; absent with reloadFailed.")] = None
    error: Annotated[str | None, msgspec.Meta(
        description="With reloadFailed: what is wrong, prefixed with errorPath when there is one (secrets "
                    "scrubbed); absent with reloaded.")] = None
    error_path: Annotated[str | None, msgspec.Meta(
        description="With reloadFailed: where in the toolset the problem is (toolset.yaml, or a field of it "
                    "such as tools[0].entrypoint), when known; absent otherwise.")] = None


_CHANGED_SPECS = (
    MethodSpec("toolsets/changed", "serverToClient", "notification",
               "A toolset imported from a folder (sourceType local) followed an edit of that folder.",
               params=ToolsetChangedParams),
)


class HtmlPageParams(Model):
    tool_call_id: Annotated[str, msgspec.Meta(
        description="A tool call (NotFound if unknown) whose renderPlan has renderer html (InvalidParams "
                    "otherwise).")]


class HtmlPageResult(Model):
    # No value in the data can close the script tag.
    html: Annotated[str, msgspec.Meta(
        description="The toolset's HTML artifact with the call's data injected as window.__TOOL_DATA__: ready "
                    "for a sandboxed iframe's srcdoc.")]


_PAGE_SPECS = (
    MethodSpec("tools/htmlPage", "clientToServer", "request",
               "The page of a tool call whose render plan uses the html renderer, its data injected where "
               "the page's scripts see it. The artifact is read at this request from inside the toolset's "
               "folder, as a regular file and never through a symlink (else a storage error).",
               params=HtmlPageParams, result=HtmlPageResult, errors=(_NF, _IP, _ST)),
)

SPECS = (*_INSPECT_SPECS, *_TOOLSET_SPECS, *_TOOL_SPECS, *_CALL_SPECS, *_CHANGED_SPECS, *_PAGE_SPECS)

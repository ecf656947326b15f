"""Toolsets: bundles of tools from Python modules and MCP servers (toolset.yaml + ZIP)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from . import tool_calls, tools
from .base import Empty, MethodSpec, Model
from .errors import ErrorCode
from .limits import LimitWarning, ToolLimits
from .mcp import ServerSandbox
from .pages import NextPageToken, PageParams
from .tools import IdFilter, Tool

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




class ToolsetResult(Model):
    toolset: Annotated[Toolset, msgspec.Meta(description="The toolset as it is now.")]
    limit_warnings: Annotated[list[LimitWarning], msgspec.Meta(description=(
        "toolsets/import: what its tools may do beyond seed 004's defaults now, as toolsets/inspect "
        "showed before install (the user's settings included on a replace)."))] = []


class ListToolsetsParams(PageParams, kw_only=True):
    toolset_ids: Annotated[IdFilter | None, msgspec.Meta(description=(
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

SPECS = (*_INSPECT_SPECS, *_TOOLSET_SPECS, *tools.SPECS, *tool_calls.CALL_SPECS, *_CHANGED_SPECS, *_PAGE_SPECS)

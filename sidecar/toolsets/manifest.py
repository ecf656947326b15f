"""``toolset.yaml``, manifest_version "1": the model, and parsing that names the place of every
mistake (``tools[2].entrypoint: ...``) and says what to fix.

An ``mcp_servers[]`` entry is the one MCP-server declaration, `api.mcp.ServerDecl` (what
mcpServers/add takes and a stored row is), plus ``tool_output``: its fields and bounds are written
there alone. The Struct spells its keys as the wire does (``connectTimeout``); toolset.yaml writes
them in snake_case (``connect_timeout``), so an entry's keys are renamed to the Struct's before the
manifest is decoded (`_declared`) and an error's path is named back in toolset.yaml's words
(`_yaml_path`). What bounds cannot say is `_check_server`'s, for a manifest's servers and a user's
(`of_server`) alike."""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, TypeGuard, cast

import msgspec

from .. import cron
from ..api.base import Id
from ..api.mcp import ServerDecl, ServerSandbox
from ..api.render_plans import RENDERERS, Renderer
from ..errors import ManifestError
from ..sandbox import settings as sandbox_settings
from ..sandbox.policy import Patch
from ..secrets import inherited
from ..store.mcp_servers import McpServerRow
from ..tools import slugs
from ..tools.config_schema import CONFIG_KEY_RULE, ConfigFieldDecl, ConfigSchema, check_config_schema
from ..tools.output import COLOUR_HINT, OutputDecl, check_colours
from ..tools.overrides import is_pattern, pattern_problem
from ..tools.providers.http.auth import auth_error
from ..tools.providers.http.spec import HttpSpec, SpecError
from ..tools.providers.http.spec import check as check_http

ENTRYPOINT_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*$"
MAX_MANIFEST_BYTES = 1 << 20
# Real manifests nest about 10 levels (an HTTP tool's input_schema the deepest); 64 leaves room
# and keeps parsing far from the C stack's limit.
MAX_MANIFEST_DEPTH = 64
# Building the data (PyYAML's constructor, in Python) costs about 8 us a node: a MiB of tiny
# lists was 3.5 s of CPU. A 100-tool manifest has about 5,000 nodes.
MAX_MANIFEST_NODES = 50_000


class _Decl(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    pass


class TriggerDecl(_Decl):
    """When the tool runs by itself (seed 004): ``on_demand`` (the default: when called) or
    ``cron``, which puts it on a schedule at install (``schedule``: a cron expression, seed 004's
    ``*/30`` included; ``prompt``: the template its output is appended to)."""

    type: Literal["on_demand", "cron", "webhook"] = "on_demand"
    schedule: str | None = None
    prompt: str | None = None


class ToolDecl(_Decl):
    id: Id
    # A Python tool's function, or ``http`` for a tool that is templated REST calls (seed 002): one of the two.
    entrypoint: Annotated[str, msgspec.Meta(pattern=ENTRYPOINT_PATTERN)] | None = None
    http: HttpSpec | None = None
    name: str | None = None
    description: str | None = None
    input_schema: dict[str, Any] | None = None  # legacy plain functions (seed 000 §10)
    renderer: dict[str, Any] | None = None  # legacy alias of a renderer override
    requires_confirmation: bool = False
    timeout: Annotated[float, msgspec.Meta(gt=0, le=3600)] | None = None  # seconds; constraints.timeout_seconds
    # Seed 004: this tool's limits over the toolset's (sidecar/sandbox/settings.py reads them).
    constraints: dict[str, Any] | None = None
    sandbox: dict[str, Any] | bool | None = None
    output: OutputDecl | None = None  # card, synthesize, ephemeral, what the model is given (seed 004)
    config_schema: ConfigSchema = {}  # this tool's own fields, beside the toolset's
    trigger: TriggerDecl | None = None
    # Seed 002: what the "+" palette calls it (default: from the id, slugs.derive) and its version
    # (default "1"). Several versions of one slug may be declared: the last one declared is current.
    slug: str | None = None
    version: str | None = None
    tags: list[str] = []


class OverrideDecl(_Decl):
    tool_id: str
    renderer: Renderer | None = None
    renderer_config: dict[str, Any] | None = None
    name_override: str | None = None
    description_override: str | None = None
    requires_confirmation: bool | None = None
    enabled: bool | None = None


class McpServerDecl(ServerDecl, kw_only=True):
    """A toolset's MCP server: the one declaration (`ServerDecl`: written in snake_case here, with
    ``sandbox: true`` for ``{}`` and ``false`` for none) and the output of its tools."""

    tool_output: Annotated[dict[str, OutputDecl], msgspec.Meta(description=(
        "The output declaration of this server's tools, by MCP tool name (a card only when declared)."))] = {}

    def row(self, toolset_id: str) -> McpServerRow:
        """The one way a declared server becomes a stored one."""
        return McpServerRow.of(self, toolset_id=toolset_id, tool_output=msgspec.to_builtins(self.tool_output))


# An mcp_servers[] entry's keys: toolset.yaml's spelling -> the declaration's, and back.
_WIRE_KEYS = {f.name: f.encode_name for f in msgspec.structs.fields(McpServerDecl)}
_YAML_KEYS = {wire: name for name, wire in _WIRE_KEYS.items()}
_SERVER_PATH = re.compile(r"^(mcp_servers\[\d+\]\.)(\w+)")


class Manifest(_Decl):
    manifest_version: Literal["1"]
    id: Id
    name: str
    version: str = "0.0.0"
    description: str = ""
    config_schema: ConfigSchema = {}  # fields shared by every tool of the toolset
    # Hosts every HTTP tool of the toolset may call, for those that list none of their own.
    allowed_hosts: list[str] = []
    # Seed 004: the limits of every tool of the toolset (each tool's own win over them).
    constraints: dict[str, Any] | None = None
    sandbox: dict[str, Any] | bool | None = None
    tools: list[ToolDecl] = []
    tool_overrides: list[OverrideDecl] = []
    mcp_servers: list[McpServerDecl] = []


@dataclass
class Parsed:
    manifest: Manifest
    overrides: list[OverrideDecl]  # explicit ones plus those from legacy tools[].renderer
    warnings: list[str] = field(default_factory=list[str])
    limits: Patch | None = None  # the toolset's constraints and sandbox
    tool_limits: dict[str, Patch] = field(default_factory=dict[str, Patch])  # each tool's, by its id in the manifest


_NO_ALIASES = "YAML anchors and aliases (*name) are not supported in toolset.yaml"


def load_yaml(text: bytes) -> Any:
    import yaml

    if len(text) > MAX_MANIFEST_BYTES:
        raise ManifestError("", f"the manifest is {len(text)} bytes; the limit is {MAX_MANIFEST_BYTES}")
    fast = getattr(yaml, "CSafeLoader", None)  # libyaml: several times faster when present
    try:
        # The event stream first: its parser keeps its own stack (no recursion), while building
        # the data recurses once per level (in C with libyaml), so a few KiB of "[[[[..." would
        # overflow the C stack and kill the process. Nothing is expanded or built until the
        # depth and the aliases are known to be harmless.
        depth = nodes = 0
        # PyYAML's stubs leave parse() unannotated: it yields the stream's events.
        events = cast("Iterator[yaml.Event]", yaml.parse(text, Loader=fast or yaml.SafeLoader))  # pyright: ignore[reportUnknownMemberType]
        for event in events:
            if isinstance(event, yaml.NodeEvent):
                nodes += 1
                if nodes > MAX_MANIFEST_NODES:
                    raise ManifestError(f"line {event.start_mark.line + 1}",
                                        f"more than {MAX_MANIFEST_NODES} values; a manifest needs far fewer")
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_MANIFEST_DEPTH:
                    raise ManifestError(f"line {event.start_mark.line + 1}",
                                        f"nested more than {MAX_MANIFEST_DEPTH} levels deep; a manifest "
                                        "needs far fewer: flatten this part")
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
            elif isinstance(event, yaml.AliasEvent):
                # An alias bomb ("billion laughs") is a few lines that expand to gigabytes once
                # walked; manifests have no need for anchors, so none are accepted.
                raise ManifestError(f"line {event.start_mark.line + 1}", _NO_ALIASES)
        return yaml.load(text, Loader=fast or yaml.SafeLoader)  # noqa: S506 - a safe loader
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else ""
        raise ManifestError(where, f"not valid YAML: {getattr(exc, 'problem', None) or exc}") from None


def _is_mapping(node: object) -> TypeGuard[dict[Any, Any]]:
    """A YAML mapping (its keys may be of any YAML type, not only strings)."""
    return isinstance(node, dict)


def _is_list(node: object) -> TypeGuard[list[Any]]:
    return isinstance(node, list)


def _path(msgspec_path: str) -> str:
    return msgspec_path.removeprefix("$").removeprefix(".")


_HINTS = {
    "manifest_version": 'write manifest_version: "1" (quoted)',
    "entrypoint": 'use "module.path:function", e.g. "tools.analyze:run"',
    "id": "ids are 1-64 characters: letters, digits, '.', '_' and '-', starting with a letter "
          "or digit (no '/', '~', ':' or '..')",
}


def parse(text: bytes) -> Parsed:
    return from_data(load_yaml(text))


def from_data(data: Any) -> Parsed:
    """Check a manifest that is already data (parsed YAML, or built for a toolset made in the UI)."""
    if not _is_mapping(data):
        raise ManifestError("", f"toolset.yaml must be a mapping of keys, not {type(data).__name__}")
    if data.get("manifest_version") == 1:
        data["manifest_version"] = "1"  # the unquoted YAML gotcha; meaning is unambiguous
    _precheck_config_schemas(data)
    _declared(cast("dict[str, Any]", data))
    try:
        manifest = msgspec.convert(data, Manifest)
    except msgspec.ValidationError as exc:
        path, reason = error_place(exc)
        path = _yaml_path(path)
        hint = _HINTS.get(path.rpartition(".")[2].split("[")[0])
        if hint and "matching regex" in reason:
            reason = f"not a valid value: {hint}"
        if ".auth" in path:  # an HTTP tool's auth: a literal secret says to write ${NAME}
            path, reason = auth_error(path, reason)
        raise ManifestError(path, reason) from None
    return _check(manifest)


def error_place(exc: msgspec.ValidationError) -> tuple[str, str]:
    """Where a decode error is (``tools[0].id``; a mapping's key as the mapping) and what it says."""
    text_ = str(exc)
    reason, sep, where = text_.rpartition(" - at `")
    if not sep:
        return "", text_
    where = where.rstrip("`")
    key, sep, mapping = where.partition("` in `")
    if sep and key == "key":  # a key of a mapping: msgspec says "at `key` in `$.env`"
        return _path(mapping), f"{reason} (a key)"
    return _path(where), reason


def _declared(data: dict[str, Any]) -> None:
    """Each ``mcp_servers[]`` entry with the declaration's keys, and its sandbox checked as a
    toolset's sandbox block is (its mistakes named in those words) and in its stored form."""
    servers: Any = data.get("mcp_servers")
    if not isinstance(servers, list):
        return  # absent, or not a list: the whole-manifest check says so
    for i, entry in enumerate(cast("list[Any]", servers)):
        if not isinstance(entry, dict):
            continue
        where = f"mcp_servers[{i}]"
        given = cast("dict[Any, Any]", entry)
        for key in given:
            if key in _YAML_KEYS and key not in _WIRE_KEYS:
                raise ManifestError(f"{where}.{key}", f"toolset.yaml writes this key {_YAML_KEYS[key]}")
        declared = {_WIRE_KEYS.get(k, k): v for k, v in given.items()}
        if "sandbox" in declared:
            declared["sandbox"] = _sandbox_block(where, declared["sandbox"])
        servers[i] = declared


def _sandbox_block(where: str, block: Any) -> Any:
    """A server's sandbox in the form it is stored in (sizes in bytes; {} for the defaults, None
    for none): ``true`` is {}, ``false`` none."""
    if block is None or block is False:
        return None
    if isinstance(block, dict) and "disk" in block:
        raise ManifestError(f"{where}.sandbox.disk", "a server is no tool call with a workspace to grow: disk "
                                                     "is a per-call limit of Python tools; remove it")
    try:
        patch, _ = sandbox_settings.layer(None, {} if block is True else block)
    except sandbox_settings.SettingError as exc:
        raise ManifestError(f"{where}.{exc.where}", exc.reason) from None
    return sandbox_settings.to_blocks(patch).get("sandbox", {})


def _yaml_path(path: str) -> str:
    """``mcp_servers[0].connectTimeout`` -> ``mcp_servers[0].connect_timeout``: a declaration's
    key as toolset.yaml writes it."""
    return _SERVER_PATH.sub(lambda m: m[1] + _YAML_KEYS.get(m[2], m[2]), path, count=1)


def yaml_entry(server: ServerDecl) -> dict[str, Any]:
    """A declaration as an ``mcp_servers[]`` entry of toolset.yaml: its keys in snake_case, what is
    at its default left out but the type (a sandbox of ``{}``, the defaults, is kept: it is not none)."""
    return {"id": server.id, "type": server.type,
            **{_YAML_KEYS[k]: v for k, v in msgspec.to_builtins(server).items() if k not in ("id", "type")}}


def of_server(decl: ServerDecl) -> Parsed:
    """A user's server (mcpServers/add, update or import) as the one server of its userMcp toolset,
    checked as a manifest's is. Its bounds are checked again: a declaration built in code (an
    import, an edit) has not been through a decoder. Errors name ``mcp_servers[0].<field>``."""
    try:
        server = msgspec.convert(msgspec.to_builtins(decl), McpServerDecl)
    except msgspec.ValidationError as exc:
        path, reason = error_place(exc)
        raise ManifestError(_yaml_path(f"mcp_servers[0].{path}" if path else "mcp_servers[0]"), reason) from None
    return _check(Manifest(manifest_version="1", id=decl.id, name=decl.id, mcp_servers=[server]))


def _precheck_config_schemas(data: dict[str, Any]) -> None:
    """Each config field on its own first: msgspec names a mapping's value ``[...]``, and the
    author needs to read which field (``tools[0].config_schema.api_key.type``)."""
    places = [("config_schema", data.get("config_schema"))]
    tools = data.get("tools")
    if _is_list(tools):
        places += [(f"tools[{i}].config_schema", t.get("config_schema")) for i, t in enumerate(tools)
                   if _is_mapping(t)]
    for where, schema in places:
        if not _is_mapping(schema):
            continue  # absent, or not a mapping: the whole-manifest check says so
        for key, value in schema.items():
            if not isinstance(key, str):
                raise ManifestError(f"{where}.{key}", f"not a valid field name: {CONFIG_KEY_RULE}")
            try:
                msgspec.convert(value, ConfigFieldDecl)
            except msgspec.ValidationError as exc:
                reason, sep, at = str(exc).rpartition(" - at `")
                inner = _path(at.rstrip("`")) if sep else ""
                reason = reason if sep else str(exc)
                raise ManifestError(f"{where}.{key}" + (f".{inner}" if inner else ""),
                                    reason + (" (a field is a mapping: description, type, secret, "
                                                            "required, default)" if not inner else "")) from None


def _check(m: Manifest) -> Parsed:
    if m.id == "builtin":
        raise ManifestError("id", "'builtin' names the tools that ship with the sidecar; choose another id")
    seen = _unique_ids("tools", [t.id for t in m.tools])
    servers = _unique_ids("mcp_servers", [s.id for s in m.mcp_servers])
    check_config_schema("config_schema", m.config_schema)
    for i, t in enumerate(m.tools):
        check_config_schema(f"tools[{i}].config_schema", t.config_schema)
        for key in t.config_schema.keys() & m.config_schema.keys():
            # One name, one value: a tool reading settings[key] must not wonder which level won.
            raise ManifestError(f"tools[{i}].config_schema.{key}",
                                f"{key!r} is also a toolset-level field (config_schema.{key}); rename one of them")
    _check_slugs(m.tools)
    for i, s in enumerate(m.mcp_servers):
        _check_server(f"mcp_servers[{i}]", s)
        for name, output in s.tool_output.items():
            _check_output(f"mcp_servers[{i}].tool_output.{name}", output)
    for i, t in enumerate(m.tools):
        if t.output is not None:
            _check_output(f"tools[{i}].output", t.output)
        if t.trigger is not None:
            _check_trigger(f"tools[{i}].trigger", t.trigger)
        if t.http is not None and not t.http.allowed_hosts and m.allowed_hosts:
            t.http = msgspec.structs.replace(t.http, allowed_hosts=list(m.allowed_hosts))
        _check_kind(i, t)
    warnings: list[str] = []
    limits = _limits("", m.constraints, m.sandbox, warnings)
    tool_limits = {t.id: patch for i, t in enumerate(m.tools)
                   if (patch := _tool_limits(i, t, warnings)) is not None}
    overrides = _with_legacy_renderers(m, warnings)
    _check_override_targets(m, seen, servers, warnings)
    return Parsed(m, overrides, warnings, limits, tool_limits)


def _check_override_targets(m: Manifest, tools: dict[str, int], servers: dict[str, int], warnings: list[str]) -> None:
    """An override names a pattern, or a tool or server declared here (else a warning: it may be a typo)."""
    for i, o in enumerate(m.tool_overrides):
        server, sep, _ = o.tool_id.partition(":")
        if is_pattern(o.tool_id):
            # fs:*, *:read_*, or read_* (the toolset's own tools): what it matches may come later.
            if (wrong := pattern_problem(o.tool_id if sep else f"{m.id}:{o.tool_id}")) is not None:
                raise ManifestError(f"tool_overrides[{i}].tool_id", f"{o.tool_id!r} is not a tool pattern: {wrong}")
        elif sep and server not in servers:
            warnings.append(f"tool_overrides[{i}].tool_id: no MCP server {server!r} is declared here")
        elif not sep and o.tool_id not in tools:
            warnings.append(f"tool_overrides[{i}].tool_id: no tool {o.tool_id!r} is declared here")


def _limits(where: str, constraints: Any, sandbox: Any, warnings: list[str]) -> Patch | None:
    try:
        patch, notes = sandbox_settings.layer(constraints, sandbox)
    except sandbox_settings.SettingError as exc:
        raise ManifestError(where + exc.where, exc.reason) from None
    warnings.extend(where + note for note in notes)
    return patch if sandbox_settings.stored(patch) else None


def _tool_limits(i: int, t: ToolDecl, warnings: list[str]) -> Patch | None:
    where = f"tools[{i}]."
    patch = _limits(where, t.constraints, t.sandbox, warnings)
    given = patch.timeout_seconds if patch is not None else None
    if given is not None and t.timeout is not None and given != t.timeout:
        raise ManifestError(f"{where}timeout", "timeout is another name for constraints.timeout_seconds, which "
                                               "says otherwise; keep one of the two")
    if t.http is not None:
        if t.sandbox:
            raise ManifestError(f"{where}sandbox", "an HTTP tool runs in no process of its own: the hosts it may "
                                                   "call are its http.allowedHosts")
        if given is not None:
            t.timeout = given  # what the HTTP runner reads
        return None
    if t.timeout is not None and given is None:
        patch = msgspec.structs.replace(patch or Patch(), timeout_seconds=float(t.timeout))
    return patch


def check_writable_paths(parsed: Parsed, data_dir: Path) -> None:
    """Refuse a writable path inside (or above) ``data_dir``: what parsing alone cannot know."""
    places = [("", parsed.limits)] + [(f"tools[{i}].", parsed.tool_limits.get(t.id))
                                      for i, t in enumerate(parsed.manifest.tools)]
    lists = [(f"{where}sandbox.writable", patch.writable or ()) for where, patch in places if patch is not None]
    lists += [(f"mcp_servers[{i}].sandbox.writable", s.sandbox.writable or [])
              for i, s in enumerate(parsed.manifest.mcp_servers) if s.sandbox is not None]
    for where, paths in lists:
        for j, path in enumerate(paths):
            try:
                sandbox_settings.check_writable(path, data_dir)
            except ValueError as exc:
                raise ManifestError(f"{where}[{j}]", str(exc)) from None


def _check_slugs(tools: list[ToolDecl]) -> None:
    """Every tool's slug, version and tags by the rules of slugs.py, each ``<slug, version>`` once;
    the slug and version filled in where the manifest gives none."""
    seen: dict[tuple[str, str], int] = {}
    for i, t in enumerate(tools):
        given = t.slug is not None
        t.slug, problem = slugs.check_slug(t.slug if t.slug is not None else slugs.derive(t.id))
        if problem:
            raise ManifestError(f"tools[{i}].slug", f"{problem}; a slug is {slugs.SLUG_RULE}")
        t.version, problem = slugs.check_version(t.version if t.version is not None else slugs.DEFAULT_VERSION)
        if problem:
            raise ManifestError(f"tools[{i}].version", f"{problem}; a version is {slugs.VERSION_RULE}")
        t.tags, where, problem = slugs.check_tags(t.tags)
        if problem:
            raise ManifestError(f"tools[{i}].tags{where}", problem)
        pair = (t.slug, t.version)
        if pair in seen:
            how = "" if given else f" (made from its id {t.id!r}; give this tool a slug: of its own)"
            raise ManifestError(f"tools[{i}].slug", f"{t.slug!r} version {t.version!r} is also tools[{seen[pair]}]'s"
                                                    f"{how}; a slug and version name one tool")
        seen[pair] = i


def _check_kind(i: int, t: ToolDecl) -> None:
    if t.http is None:
        if t.entrypoint is None:
            raise ManifestError(f"tools[{i}]", 'a tool needs an entrypoint (a Python function, "module:function") '
                                               "or an http block (templated REST calls)")
        return
    if t.entrypoint is not None:
        raise ManifestError(f"tools[{i}].entrypoint", "an HTTP tool has no entrypoint; keep one of the two")
    try:
        check_http(t.http, t.input_schema)
    except SpecError as exc:
        raise ManifestError(f"tools[{i}].http" + (f".{exc.where}" if exc.where else ""), exc.reason) from None


def _check_trigger(where: str, trigger: TriggerDecl) -> None:
    if trigger.type == "webhook":
        raise ManifestError(f"{where}.type", "webhook triggers are not implemented (seed 004); use cron or on_demand")
    if trigger.type == "on_demand":
        if trigger.schedule is not None:
            raise ManifestError(f"{where}.schedule", "only a cron trigger has a schedule; set type: cron")
        return
    if trigger.schedule is None:
        raise ManifestError(f"{where}.schedule", "a cron trigger needs a schedule, e.g. '*/30' (every 30 minutes) "
                                                 "or '0 9 * * 1-5'")
    try:
        trigger.schedule = cron.normalise(trigger.schedule)
    except cron.CronError as exc:
        raise ManifestError(f"{where}.schedule", str(exc)) from None


def _check_output(where: str, output: OutputDecl) -> None:
    bad = check_colours(output)
    if bad is not None:
        raise ManifestError(f"{where}.{bad}", COLOUR_HINT)


def _unique_ids(section: str, ids: list[str]) -> dict[str, int]:
    seen: dict[str, int] = {}
    for i, id_ in enumerate(ids):
        if id_ in seen:
            raise ManifestError(f"{section}[{i}].id", f"{id_!r} is declared twice (also {section}[{seen[id_]}])")
        seen[id_] = i
    return seen


def _check_server(where: str, s: ServerDecl) -> None:
    if s.type == "stdio":
        if not s.command:
            raise ManifestError(f"{where}.command", "a stdio server needs the command to start it")
        if s.url:
            raise ManifestError(f"{where}.url", "a stdio server has no url; set type to sse or streamable-http")
        _check_command(where, s)
        for i, name in enumerate(s.env_passthrough):
            if (why := inherited.refusal(name)) is not None:
                raise ManifestError(f"{where}.env_passthrough[{i}]", why)
        _check_server_sandbox(where, s)
        return
    if s.env_passthrough:
        raise ManifestError(f"{where}.env_passthrough", f"a {s.type} server runs elsewhere: no variable of this "
                                                        "machine reaches it; remove env_passthrough")
    if s.sandbox is not None:
        raise ManifestError(f"{where}.sandbox", f"only a stdio server runs as a process of this machine that the "
                                                f"sandbox can confine; a {s.type} server runs elsewhere: remove "
                                                "sandbox")
    if not s.url or not re.match(r"^https?://[^/\s]+", s.url):
        raise ManifestError(f"{where}.url", f"a {s.type} server needs an http:// or https:// url")
    if s.command:
        raise ManifestError(f"{where}.command", f"a {s.type} server is reached by url, not started by a command")


def _check_command(where: str, s: ServerDecl) -> None:
    """A command is one program: a whole shell line (``npx -y foo``, as a config file's one string)
    or a path relative to nothing (the sidecar's own folder is no place a user knows) is refused with
    the declaration that works."""
    command = s.command or ""
    if "${" in command:
        return  # a reference: what it resolves to is checked when the server starts
    try:
        words = shlex.split(command, posix=os.name != "nt")
    except ValueError:
        words = command.split()
    where_file = command if os.path.isabs(command) else os.path.join(s.cwd, command) if s.cwd else None
    if len(words) > 1 and not (where_file is not None and os.path.exists(where_file)):
        fixed = json.dumps({"command": words[0], "args": [*words[1:], *s.args]})
        raise ManifestError(f"{where}.command", f"{command!r} is a whole command line, not a program: give the "
                                                f"program as command and the rest as args: {fixed}")
    if not os.path.isabs(command) and (os.sep in command or (os.altsep or os.sep) in command) and not s.cwd:
        raise ManifestError(f"{where}.command", f"{command!r} is a relative path, relative to nothing the server "
                                                "knows: give its absolute path, or set cwd to the folder it is in")


def _check_server_sandbox(where: str, s: ServerDecl) -> None:
    """``s.sandbox`` checked as a toolset's sandbox block is, and kept in the form it is stored in
    (sizes in bytes; {} for the defaults)."""
    if s.sandbox is not None:
        s.sandbox = msgspec.convert(_sandbox_block(where, msgspec.to_builtins(s.sandbox)), ServerSandbox)


def _with_legacy_renderers(m: Manifest, warnings: list[str]) -> list[OverrideDecl]:
    """The explicit overrides, completed by the legacy ``tools[].renderer`` of each tool."""
    explicit = {o.tool_id: n for n, o in enumerate(m.tool_overrides)}
    overrides = list(m.tool_overrides)
    for i, t in enumerate(m.tools):
        if t.renderer is None:
            continue
        config = dict(t.renderer)
        kind = config.pop("type", None)
        if kind not in RENDERERS:
            raise ManifestError(f"tools[{i}].renderer.type", f"must be one of {', '.join(RENDERERS)}")
        if t.id not in explicit:
            overrides.append(OverrideDecl(tool_id=t.id, renderer=kind, renderer_config=config))
            continue
        # Field by field: what tool_overrides sets wins, the legacy renderer fills what it leaves.
        # The legacy renderer is one thing (a type and its config), so it fills both or neither.
        n = explicit[t.id]
        o = overrides[n]
        if o.renderer is not None or o.renderer_config is not None:
            warnings.append(f"tools[{i}].renderer is ignored: tool_overrides sets {t.id!r}'s renderer (it wins)")
            continue
        overrides[n] = msgspec.structs.replace(o, renderer=kind, renderer_config=config)
    return overrides

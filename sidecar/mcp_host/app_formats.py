"""Where each app keeps its MCP servers, and each app's shape of an entry made one shape.

Formats as the apps write them (fixtures in tests/mcp_configs/fixtures/):
- Claude Desktop: ``claude_desktop_config.json`` ``{"mcpServers": {name: {command, args, env}}}``.
- Claude Code: ``~/.claude.json`` with user servers in ``mcpServers`` and each project's in
  ``projects[folder].mcpServers``; a project's shared ``.mcp.json``. ``type`` stdio/http/sse.
- VS Code: user and workspace (``.vscode/mcp.json``) ``{"servers": {...}, "inputs": [...]}``.
- Cursor: ``~/.cursor/mcp.json`` and a project's ``.cursor/mcp.json``, ``mcpServers``.
- Windsurf: ``~/.codeium/windsurf/mcp_config.json``, ``mcpServers`` with ``serverUrl``.
- Zed: ``settings.json`` ``context_servers``: ``{command, args, env}``, the older
  ``{"command": {path, args, env}}``, ``{url, headers}``, or an extension's (not importable).
- goose: ``config.yaml`` ``extensions``: ``type`` stdio (``cmd``, ``args``, ``envs``,
  ``env_keys``), sse or streamable_http (``uri``, ``headers``), ``enabled``; builtins stay.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from .app_vars import Source
from .config_text import MAX_CONFIG_BYTES, MAX_STATE_BYTES, ConfigError, parse, parse_plain, parse_yaml, read_text

MAX_PROJECTS = 200  # ~/.claude.json projects whose .mcp.json discovery looks at


@dataclass(frozen=True)
class Place:
    """A config file and what it is: whose, and the project folder it belongs to (if any)."""

    source: Source
    path: Path
    project: Path | None = None


@dataclass
class Entry:
    """One server entry in the common shape: type, command, args, env, cwd, url, headers, enabled."""

    name: str
    fields: dict[str, Any]
    project: Path | None = None


@dataclass
class Parsed:
    entries: list[Entry] = field(default_factory=list)
    inputs: Any = None  # VS Code's inputs list, as written
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (name, why)
    projects: list[Path] = field(default_factory=list)  # Claude Code's known project folders
    notes: list[str] = field(default_factory=list)  # about the file as a whole


class _ClaudeProject(msgspec.Struct):
    mcpServers: dict[str, Any] | None = None  # noqa: N815 - Claude Code's key


class _ClaudeState(msgspec.Struct):
    mcpServers: dict[str, Any] | None = None  # noqa: N815
    projects: dict[str, _ClaudeProject] | None = None


def default_places() -> list[Place]:
    """Where each app keeps its user-level MCP configuration on this platform."""
    home = Path.home()
    if sys.platform == "darwin":
        support = home / "Library" / "Application Support"
        claude, code, zed = support / "Claude", support / "Code", home / ".config" / "zed"
        goose = home / ".config" / "goose"
    elif sys.platform == "win32":
        appdata = Path(os.environ.get("APPDATA") or home / "AppData" / "Roaming")
        claude, code, zed = appdata / "Claude", appdata / "Code", appdata / "Zed"
        goose = appdata / "Block" / "goose" / "config"
    else:
        config = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config")
        claude, code, zed, goose = config / "Claude", config / "Code", config / "zed", config / "goose"
    claude_code = Path(os.environ.get("CLAUDE_CONFIG_DIR") or home)
    return [
        Place("claude", claude / "claude_desktop_config.json"),
        Place("claudeCode", claude_code / ".claude.json"),
        Place("vscode", code / "User" / "mcp.json"),
        Place("vscode", code.with_name(code.name + " - Insiders") / "User" / "mcp.json"),
        Place("cursor", home / ".cursor" / "mcp.json"),
        Place("windsurf", home / ".codeium" / "windsurf" / "mcp_config.json"),
        Place("zed", zed / "settings.json"),
        Place("goose", goose / "config.yaml"),
    ]


def project_places(folder: Path) -> list[Place]:
    """The MCP configs a project folder may hold, one per app that reads them."""
    return [Place("claudeCode", folder / ".mcp.json", folder),
            Place("vscode", folder / ".vscode" / "mcp.json", folder),
            Place("cursor", folder / ".cursor" / "mcp.json", folder),
            Place("zed", folder / ".zed" / "settings.json", folder)]


def place_of(path: Path) -> Place:
    """What a file given by the user is, from where it is and what it is called."""
    parent, name = path.parent, path.name
    if name == ".claude.json":
        return Place("claudeCode", path)
    if name == ".mcp.json":
        return Place("claudeCode", path, parent)
    if name == "claude_desktop_config.json":
        return Place("claude", path)
    if name == "mcp_config.json" or "windsurf" in path.parts:
        return Place("windsurf", path)
    if path.suffix in (".yaml", ".yml"):
        return Place("goose", path)
    if parent.name in (".vscode", ".cursor", ".zed"):
        source: Source = {".vscode": "vscode", ".cursor": "cursor", ".zed": "zed"}[parent.name]  # type: ignore[assignment]
        return Place(source, path, None if parent.parent == Path.home() else parent.parent)
    if name == "settings.json" and parent.name.lower() == "zed":
        return Place("zed", path)
    return Place("claude", path)  # refined by what the file holds (`_refined`)


def load(place: Place) -> tuple[Place, Parsed]:
    """Read one file as `place` says (refined by what it holds when the name said little)."""
    try:
        if place.source == "goose":
            data = parse_yaml(read_text(place.path))
        elif place.source == "claudeCode" and place.project is None:
            return place, _claude_state(place.path)
        else:
            data = parse(read_text(place.path))
    except ConfigError as exc:
        raise ConfigError(f"{place.path} {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{place.path} holds {type(data).__name__}, not an object of MCP servers")
    place = _refined(place, data)
    return place, _entries(place, data)


def _claude_state(path: Path) -> Parsed:
    try:
        text = read_text(path, MAX_STATE_BYTES)
        try:
            state = parse_plain(text, _ClaudeState)
        except ConfigError:
            if len(text) > MAX_CONFIG_BYTES:
                raise
            state = msgspec.convert(parse(text), _ClaudeState)  # edited by hand: comments, JSON5
    except (ConfigError, msgspec.ValidationError) as exc:
        raise ConfigError(f"{path} {exc}") from None
    out = Parsed()
    _named(out, state.mcpServers or {}, None)
    projects = list((state.projects or {}).items())
    if len(projects) > MAX_PROJECTS:
        out.notes.append(f"{path} lists {len(projects)} projects; the servers of the first {MAX_PROJECTS} are "
                         "offered (import a project's own with project)")
    for folder, project in projects[:MAX_PROJECTS]:
        out.projects.append(Path(folder))
        if project.mcpServers:
            _named(out, project.mcpServers, Path(folder))
    return out


def _refined(place: Place, data: dict[str, Any]) -> Place:
    if place.source != "claude" or "mcpServers" in data:
        return place
    if "servers" in data:
        return Place("vscode", place.path, place.project)
    if "context_servers" in data:
        return Place("zed", place.path, place.project)
    if "extensions" in data:
        return Place("goose", place.path, place.project)
    return place


def _entries(place: Place, data: dict[str, Any]) -> Parsed:
    out = Parsed()
    if place.source == "zed":
        servers, key = data.get("context_servers"), "context_servers"
    elif place.source == "goose":
        servers, key = data.get("extensions"), "extensions"
    elif place.source == "vscode":
        mcp = data.get("mcp")  # VS Code before mcp.json kept them in settings.json under "mcp"
        servers = data.get("servers", data.get("mcpServers", mcp.get("servers") if isinstance(mcp, dict) else None))
        key = "servers"
        out.inputs = data.get("inputs", mcp.get("inputs") if isinstance(mcp, dict) else None)
    else:
        servers, key = data.get("mcpServers"), "mcpServers"
    if not isinstance(servers, dict):
        raise ConfigError(f"{place.path} has no {key} object")
    _named(out, servers, place.project, place.source)
    return out


def _named(out: Parsed, servers: dict[str, Any], project: Path | None, source: Source = "claudeCode") -> None:
    for name, raw in servers.items():
        if not isinstance(raw, dict):
            out.skipped.append((str(name), "the entry is not an object"))
            continue
        try:
            fields = _zed(raw) if source == "zed" else _goose(raw) if source == "goose" else _common(raw)
        except ConfigError as exc:
            out.skipped.append((str(name), str(exc)))
            continue
        out.entries.append(Entry(str(name), fields, project))


def _common(raw: dict[str, Any]) -> dict[str, Any]:
    """Claude Desktop, Claude Code, VS Code, Cursor and Windsurf: one shape with small differences."""
    fields = {k: raw.get(k) for k in ("type", "command", "args", "env", "cwd", "headers", "envFile")}
    fields["url"] = raw.get("url") or raw.get("serverUrl")  # Windsurf's name for it
    fields["enabled"] = raw.get("disabled") is not True and raw.get("enabled") is not False
    return fields


def _zed(raw: dict[str, Any]) -> dict[str, Any]:
    command = raw.get("command")
    enabled = raw.get("enabled") is not False
    if isinstance(command, dict):  # the older shape: "command": {"path", "args", "env"}
        return {"type": "stdio", "command": command.get("path"), "args": command.get("args"),
                "env": command.get("env"), "enabled": enabled}
    if command is not None:
        return {"type": "stdio", "command": command, "args": raw.get("args"), "env": raw.get("env"), "enabled": enabled}
    if raw.get("url"):
        return {"type": "http", "url": raw["url"], "headers": raw.get("headers"), "enabled": enabled}
    raise ConfigError("a Zed extension's server (its command is inside the extension); add the same "
                      "server with mcpServers/add")


_GOOSE_TYPES = {"stdio": "stdio", "sse": "sse", "streamable_http": "http"}


def _goose(raw: dict[str, Any]) -> dict[str, Any]:
    kind = raw.get("type")
    if not isinstance(kind, str) or kind not in _GOOSE_TYPES:
        raise ConfigError(f"goose's own {kind!r} extension, which runs inside goose; nothing to import")
    env = raw.get("envs")
    keys = raw.get("env_keys")
    if isinstance(keys, list):  # kept in goose's keyring: the values become secrets to set here
        env = {**(env if isinstance(env, dict) else {}), **{str(k): "${" + str(k) + "}" for k in keys}}
    fields: dict[str, Any] = {"type": _GOOSE_TYPES[kind], "enabled": raw.get("enabled") is not False, "env": env}
    if kind == "stdio":
        fields.update(command=raw.get("cmd"), args=raw.get("args"), cwd=None)
    else:
        fields.update(url=raw.get("uri"), headers=raw.get("headers"))
    return fields

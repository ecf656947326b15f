"""MCP servers configured in other apps: Claude Desktop, Claude Code, VS Code, Cursor, Windsurf,
Zed and goose.

Users move here from those apps; reading their files spares them typing every server again.
`app_formats` knows where each app keeps them and its shape of an entry, `app_vars` its variables;
this module makes each entry a server as mcpServers/add takes it, or says why it cannot. One bad
entry, or one name two files use, never costs the others: it is skipped or renamed, and said so.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..api.base import is_id
from ..api.mcp import ServerType
from .app_formats import Entry, Place, default_places, load, place_of, project_places
from .app_vars import Expander, Input, Source, inputs_of
from .config_text import ConfigError

__all__ = ["ConfigError", "Found", "Skipped", "discover", "read"]

# A command with one of these is a shell line: splitting it on spaces would change what it does.
_SHELL_SYNTAX = re.compile(r"[|&;<>()`]|\$\(|\$[A-Za-z_]")


@dataclass
class Found:
    id: str
    source: Source
    path: str
    type: ServerType
    command: str | None = None
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    enabled: bool = True
    project: str | None = None
    inputs: list[Input] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    cwd_given: bool = True  # False: cwd is the project's, where the app would start it anyway

    def same_server(self, other: Found) -> bool:
        """Runs the same thing: a user-level server and a project's copy of it are one server."""
        same_cwd = self.cwd == other.cwd or not (self.cwd_given and other.cwd_given)
        return same_cwd and (self.type, self.command, self.args, self.url) == (
            other.type, other.command, other.args, other.url)


@dataclass
class Skipped:
    id: str
    path: str
    reason: str


Known = Callable[[str], bool]


def discover(path: Path | None, project: Path | None = None,
             known: Known = lambda name: name in os.environ) -> tuple[list[Found], list[Skipped], list[str]]:
    """The servers of one given file, or of every app's usual file on this machine (and of
    `project`'s own configs); one entry per id: a same-named server from another file is renamed,
    the same server configured twice is offered once. `known` says which variables are set."""
    found: list[Found] = []
    skipped: list[Skipped] = []
    warnings: list[str] = []
    if path is not None:
        if not path.exists():  # a FIFO or a device exists: read_text says what it is instead
            raise FileNotFoundError(path)
        places = [place_of(path)]
    else:
        places = default_places()
    if project is not None:
        places += project_places(project)
    seen: set[Path] = set()
    while places:
        place = places.pop(0)
        if place.path in seen or (path is None or place.path != path) and not place.path.is_file():
            continue
        seen.add(place.path)
        try:
            more, gone, projects, notes = _read_place(place, known, project)
        except ConfigError as exc:
            if path is not None and place.path == path:
                raise
            warnings.append(str(exc))
            continue
        found += more
        skipped += gone
        warnings += notes
        if path is None and place.source == "claudeCode" and place.project is None:
            places += [Place("claudeCode", p / ".mcp.json", p) for p in projects]  # the projects Claude Code knows
    return _one_per_id(found), skipped, warnings


def read(path: Path, known: Known = lambda name: name in os.environ) -> tuple[list[Found], list[str]]:
    """The servers in one file, and why entries were skipped (tests and tools)."""
    found, skipped, _, _ = _read_place(place_of(path), known, None)
    return found, [f"{s.path}: {s.id!r} skipped: {s.reason}" for s in skipped]


def _read_place(place: Place, known: Known, workspace: Path | None
                ) -> tuple[list[Found], list[Skipped], list[Path], list[str]]:
    """`workspace`: what a user-level file's ${workspaceFolder} means (the project previewed with it)."""
    place, parsed = load(place)
    inputs = inputs_of(parsed.inputs)
    found: list[Found] = []
    skipped = [Skipped(name, str(place.path), why) for name, why in parsed.skipped]
    for entry in parsed.entries:
        try:
            found.append(_server(entry, place, inputs, known, workspace))
        except ConfigError as exc:
            skipped.append(Skipped(entry.name, str(place.path), str(exc)))
    return found, skipped, parsed.projects, parsed.notes


def _one_per_id(found: list[Found]) -> list[Found]:
    unique: dict[str, Found] = {}
    for f in found:
        first = unique.get(f.id)
        if first is None:
            unique[f.id] = f
        elif first.same_server(f):
            first.warnings.append(f"also configured in {f.path}{_of_project(f)}; offered once")
        else:
            scope = Path(f.project).name if f.project else f.source
            new_id = _safe_id(f"{f.id}-{scope}")
            n = 2
            while new_id in unique:
                new_id, n = _safe_id(f"{f.id}-{scope}-{n}"), n + 1
            f.warnings.append(f"renamed from {f.id!r}: {first.path}{_of_project(first)} has another server "
                              "by that name")
            f.id = new_id
            unique[new_id] = f
    return list(unique.values())


def _of_project(f: Found) -> str:
    return f" (project {f.project})" if f.project and not f.path.startswith(f.project) else ""


def _server(entry: Entry, place: Place, inputs: dict[str, Input], known: Known, workspace: Path | None) -> Found:
    raw = entry.fields
    project = entry.project or place.project
    values = Expander(place.source, project=project or workspace, inputs=inputs, known=known)
    name = entry.name
    server_id = name if is_id(name) else _safe_id(name)
    if server_id != name:
        values.warnings.append(f"renamed from {name!r}: ids are letters, digits, '.', '_' and '-'")
    if raw.get("envFile"):
        values.warnings.append("envFile is not read; put those variables in the environment, in env, or in "
                               "the secret store (secrets/set)")
    url = raw.get("url")
    kind = _kind(raw.get("type"), url)
    common: dict[str, Any] = {"id": server_id, "source": place.source, "path": str(place.path), "type": kind,
                              "enabled": bool(raw.get("enabled", True)),
                              "project": str(project) if project else None}
    if not common["enabled"]:
        values.warnings.append("turned off in that app: it is imported turned off")
    if kind == "stdio":
        command = raw.get("command")
        if not isinstance(command, str) or not command.strip():
            raise ConfigError("a stdio server needs a command")
        args = values.strings(raw.get("args"), "args")
        command, args = _command(values.value(command, "command"), args, project, values.warnings)
        cwd = _cwd(values.value(str(raw["cwd"]), "cwd"), project) if raw.get("cwd") else (
            str(project) if project else None)  # the app starts a project's servers in the project
        found = Found(**common, command=command, args=args, env=values.mapping(raw.get("env"), "env"), cwd=cwd,
                      cwd_given=bool(raw.get("cwd")))
    else:
        url = values.value(url, "url") if isinstance(url, str) else None
        # ${API_BASE_URL}/mcp: an http(s) URL once the variable is resolved at connect time
        if url is None or not re.match(r"^(https?://|\$\{[A-Za-z_][A-Za-z0-9_]*\})", url):
            raise ConfigError(f"a {kind} server needs an http(s) url")
        found = Found(**common, url=url, headers=values.mapping(raw.get("headers"), "headers"),
                      env=values.mapping(raw.get("env"), "env"))
    for asked in values.asked.values():
        values.warnings.append(f"asks for {asked.description or asked.prompt_id!r}: store it as the secret "
                               f"{asked.name} with secrets/set")
    found.inputs = list(values.asked.values())
    found.warnings = values.warnings
    return found


def _command(command: str, args: list[str], project: Path | None, warnings: list[str]) -> tuple[str, list[str]]:
    """The program to run and its arguments: a whole shell line in `command` split into them (or
    refused when only a shell can run it), a relative path made absolute where the app would."""
    if any(c.isspace() for c in command) and not Path(command).expanduser().is_file():
        if _SHELL_SYNTAX.search(re.sub(r"\$\{[A-Za-z_][A-Za-z0-9_]*\}", "", command)):
            raise ConfigError(f"command {command!r} is a shell line (pipes, redirections or shell variables); "
                              "run it through a shell instead: command \"sh\" (or \"cmd\" on Windows) with args "
                              f"[\"-c\", {command!r}]")
        try:
            parts = shlex.split(command, posix=os.name != "nt")
        except ValueError as exc:
            raise ConfigError(f"command {command!r} is a shell line that cannot be split: {exc}") from None
        warnings.append(f"command {command!r} was split into the program {parts[0]!r} and the arguments "
                        f"{parts[1:]!r} (a command is one program; its arguments go in args)")
        command, args = parts[0], parts[1:] + args
    if command.startswith("~"):
        command = os.path.expanduser(command)
    if not os.path.isabs(command) and ("/" in command or "\\" in command):
        if project is None:
            raise ConfigError(f"command {command!r} is a relative path, and this file belongs to no project it "
                              "could be relative to; give the program's absolute path")
        resolved = os.path.normpath(project / command)
        warnings.append(f"command {command!r} is relative to the project: {resolved}"
                        + ("" if os.path.isfile(resolved) else " (which does not exist)"))
        command = resolved
    return command, args


def _cwd(cwd: str, project: Path | None) -> str:
    cwd = os.path.expanduser(cwd)
    if os.path.isabs(cwd):
        return cwd
    if project is None:
        raise ConfigError(f"cwd {cwd!r} is a relative path; give an absolute one")
    return os.path.normpath(project / cwd)


def _kind(declared: Any, url: Any) -> ServerType:
    """The server type an app's entry means (its own spelling, or guessed from the URL)."""
    if declared in ("http", "streamable-http", "streamableHttp", "streamable_http") or (declared is None and url):
        return "sse" if declared is None and str(url).rstrip("/").endswith("/sse") else "streamable-http"
    if declared == "sse":
        return "sse"
    if declared in (None, "stdio", "local"):
        return "stdio"
    raise ConfigError(f"unknown type {declared!r}")


def _safe_id(name: str) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-._")[:64]
    return cleaned or "server"

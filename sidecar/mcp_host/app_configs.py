"""MCP servers configured in other apps: Claude Desktop, VS Code and Cursor.

Users move here from those apps; reading their files spares them typing every server again.
Claude Desktop and Cursor keep ``{"mcpServers": {name: {command, args, env} | {url, headers}}}``;
VS Code keeps ``{"servers": {name: {type, command, args, env, url, headers}}, "inputs": [...]}``
(JSON with comments), whose ``${input:x}`` prompts and ``${env:X}`` references become our
``${VAR}`` placeholders, resolved at connect time (the secret store, then the environment).
"""

from __future__ import annotations

import os
import re
import stat
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import msgspec

from ..api.base import is_id
from ..api.mcp import ServerType

Source = Literal["claude", "vscode", "cursor"]
# These files hold a few servers (KiBs); a MiB is far beyond any real one and keeps the time
# spent on a hostile one small.
MAX_CONFIG_BYTES = 1 << 20
MAX_CONFIG_DEPTH = 64  # real configs nest 4-6 levels (servers, one server, its env)
# json5 is pure Python and recursive (about a second per 100 KiB): only the fallback for small
# files that JSON with comments does not cover (unquoted keys, single quotes).
MAX_JSON5_BYTES = 64 << 10

# JSON5 ends a line comment at CR, U+2028 and U+2029 too: stopping only at LF would hide from the
# nesting count the brackets json5 then reads.
_LINE_COMMENT = r"//[^\n\r\u2028\u2029]*"
_BLOCK_COMMENT = r"/\*[\s\S]*?\*/"
_STRING = r'"(?:[^"\\\n]|\\.)*"'
# JSONC tokens that matter for removing comments and trailing commas: strings (kept whole),
# comments (dropped), and commas before a closing bracket (dropped).
_JSONC = re.compile(rf"{_STRING}|{_LINE_COMMENT}|{_BLOCK_COMMENT}"
                    rf"|,(?=(?:\s|{_LINE_COMMENT}|{_BLOCK_COMMENT})*[}}\]])")
_NESTING = re.compile(rf"{_STRING}|'(?:[^'\\\n]|\\.)*'|{_LINE_COMMENT}|{_BLOCK_COMMENT}|[\[{{]|[\]}}]")

_INPUT = re.compile(r"\$\{input:([^}]+)\}")
_ENV = re.compile(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}")


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
    warnings: list[str] = field(default_factory=list)


class ConfigError(ValueError):
    pass


def default_paths() -> list[tuple[Source, Path]]:
    """Where each app keeps its user-level MCP configuration on this platform."""
    home = Path.home()
    if sys.platform == "darwin":
        support = home / "Library" / "Application Support"
        claude, code = support / "Claude", support / "Code" / "User"
    elif sys.platform == "win32":
        appdata = Path(os.environ.get("APPDATA", home / "AppData" / "Roaming"))
        claude, code = appdata / "Claude", appdata / "Code" / "User"
    else:
        config = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config")
        claude, code = config / "Claude", config / "Code" / "User"
    return [("claude", claude / "claude_desktop_config.json"), ("vscode", code / "mcp.json"),
            ("cursor", home / ".cursor" / "mcp.json")]


def discover(path: Path | None) -> tuple[list[Found], list[str]]:
    """The servers of one given file, or of every app's usual file on this machine; one entry per
    id (the first found wins, with a warning)."""
    if path is not None:
        if not path.exists():  # a FIFO or a device exists: read() says what it is instead
            raise FileNotFoundError(path)
        found, warnings = read(path)
    else:
        found, warnings = [], []
        for source, candidate in default_paths():
            if not candidate.is_file():
                continue
            try:
                more, notes = read(candidate, source)
            except ConfigError as exc:
                warnings.append(str(exc))
                continue
            found += more
            warnings += notes
    unique: dict[str, Found] = {}
    for f in found:
        if f.id in unique:
            warnings.append(f"{f.path}: {f.id!r} is also in {unique[f.id].path}; the first one is offered")
        else:
            unique[f.id] = f
    return list(unique.values()), warnings


def read(path: Path, source: Source | None = None) -> tuple[list[Found], list[str]]:
    """The servers in one file, and warnings about entries that were skipped."""
    try:
        data = parse(_read_text(path))
    except ConfigError as exc:
        raise ConfigError(f"{path} {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path} holds {type(data).__name__}, not an object with mcpServers or servers")
    if source is None:
        source = _guess(path, data)
    entries = data.get("servers") if source == "vscode" else data.get("mcpServers")
    if entries is None and source == "vscode":
        entries = data.get("mcpServers")  # some people paste the Claude shape into mcp.json
    if not isinstance(entries, dict):
        raise ConfigError(f"{path} has no {'servers' if source == 'vscode' else 'mcpServers'} object")
    inputs = _inputs(data.get("inputs")) if source == "vscode" else {}
    found, warnings = [], []
    for name, entry in entries.items():
        try:
            found.append(_server(str(name), entry, source, path, inputs))
        except ConfigError as exc:
            warnings.append(f"{path}: {name!r} skipped: {exc}")
    return found, warnings


def _read_text(path: Path) -> str:
    """The file's text, if it is a regular file within the size limit. Opened non-blocking and
    checked with fstat: a FIFO put at the path would otherwise hold the thread until written to."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise ConfigError(f"cannot be read: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError("is not a regular file; give the path of an MCP config (.json)")
        os.set_blocking(fd, True)
        raw = f.read(MAX_CONFIG_BYTES + 1)
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(f"is larger than {MAX_CONFIG_BYTES >> 20} MiB; not an MCP config")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"is not UTF-8 text: {exc.reason} at byte {exc.start}") from None


def parse(text: str) -> Any:
    """JSON, JSON with comments and trailing commas (VS Code's), or small JSON5; nesting beyond
    MAX_CONFIG_DEPTH is refused before any parser (all recursive) sees the text."""
    depth = 0
    for token in _NESTING.finditer(text):
        first = token[0][0]
        if first in "[{":
            depth += 1
            if depth > MAX_CONFIG_DEPTH:
                line = text.count("\n", 0, token.start()) + 1
                raise ConfigError(f"is nested more than {MAX_CONFIG_DEPTH} levels deep (line {line}); "
                                  "not an MCP config")
        elif first in "]}":
            depth -= 1
    plain = _JSONC.sub(lambda m: m[0] if m[0][0] == '"' else "", text)
    try:
        return msgspec.json.decode(plain)
    except msgspec.DecodeError as exc:
        problem = str(exc)
    except RecursionError:  # deeper than the count saw: still a refusal, never -32603
        raise ConfigError(f"is nested more than {MAX_CONFIG_DEPTH} levels deep; not an MCP config") from None
    if len(text.encode()) > MAX_JSON5_BYTES:
        raise ConfigError(f"is not valid JSON: {problem}")
    import json5  # a pure-Python parser of the rest of JSON5 (unquoted keys, single quotes)

    try:
        return json5.loads(text)
    except ValueError:
        raise ConfigError(f"is not valid JSON: {problem}") from None
    except RecursionError:
        raise ConfigError(f"is nested more than {MAX_CONFIG_DEPTH} levels deep; not an MCP config") from None


def _guess(path: Path, data: dict[str, Any]) -> Source:
    if "servers" in data and "mcpServers" not in data:
        return "vscode"
    if ".cursor" in path.parts:
        return "cursor"
    return "claude"


def _inputs(raw: Any) -> dict[str, str]:
    """VS Code prompt ids -> the environment variable that will stand in for the prompt."""
    out = {}
    for item in raw if isinstance(raw, list) else ():
        if isinstance(item, dict) and isinstance(item.get("id"), str):
            out[item["id"]] = _env_name(item["id"])
    return out


class _Values:
    """Reads an entry's strings as the sidecar will use them: VS Code's ${input:...} prompts and
    ${env:VAR} become ${VAR}, and what cannot carry over is said in ``warnings``."""

    def __init__(self, inputs: dict[str, str]) -> None:
        self.inputs = inputs
        self.warnings: list[str] = []

    def value(self, v: Any, where: str) -> str:
        if not isinstance(v, (str, int, float, bool)):
            raise ConfigError(f"{where} is not a string")
        text = str(v)
        for prompt in _INPUT.findall(text):
            var = self.inputs.get(prompt) or _env_name(prompt)
            self.warnings.append(f"{where} asked VS Code's user for {prompt!r}; set ${{{var}}} in the environment")
        text = _INPUT.sub(lambda m: "${" + (self.inputs.get(m[1]) or _env_name(m[1])) + "}", text)
        text = _ENV.sub(r"${\1}", text)
        if "${workspaceFolder}" in text:
            self.warnings.append(f"{where} uses ${{workspaceFolder}}, which has no meaning here; edit it after import")
        return text

    def mapping(self, raw: Any, where: str) -> dict[str, str]:
        if raw is None:
            return {}
        if not isinstance(raw, dict):
            raise ConfigError(f"{where} is not an object")
        return {str(k): self.value(v, f"{where}.{k}") for k, v in raw.items()}


def _server(name: str, entry: Any, source: Source, path: Path, inputs: dict[str, str]) -> Found:
    if not isinstance(entry, dict):
        raise ConfigError("the entry is not an object")
    read = _Values(inputs)
    server_id = name if is_id(name) else _safe_id(name)
    if server_id != name:
        read.warnings.append(f"renamed from {name!r}: ids are letters, digits, '.', '_' and '-'")
    url = entry.get("url") or entry.get("serverUrl")
    kind = _kind(entry.get("type"), url)
    if "envFile" in entry:
        read.warnings.append("envFile is not read; put those variables in the environment or in env")
    if kind == "stdio":
        command = entry.get("command")
        if not isinstance(command, str) or not command.strip():
            raise ConfigError("a stdio server needs a command")
        args = entry.get("args") or []
        if not isinstance(args, list):
            raise ConfigError("args is not a list")
        return Found(server_id, source, str(path), kind, command=read.value(command, "command"),
                     args=[read.value(a, f"args[{i}]") for i, a in enumerate(args)],
                     env=read.mapping(entry.get("env"), "env"),
                     cwd=read.value(entry["cwd"], "cwd") if entry.get("cwd") else None, warnings=read.warnings)
    if not isinstance(url, str) or not re.match(r"^https?://", url):
        raise ConfigError(f"a {kind} server needs an http(s) url")
    return Found(server_id, source, str(path), kind, url=read.value(url, "url"),
                 headers=read.mapping(entry.get("headers"), "headers"), env=read.mapping(entry.get("env"), "env"),
                 warnings=read.warnings)


def _kind(declared: Any, url: Any) -> ServerType:
    """The server type an app's entry means (its own spelling, or guessed from the URL)."""
    if declared in ("http", "streamable-http", "streamableHttp") or (declared is None and url):
        return "sse" if declared is None and str(url).rstrip("/").endswith("/sse") else "streamable-http"
    if declared == "sse":
        return "sse"
    if declared in (None, "stdio"):
        return "stdio"
    raise ConfigError(f"unknown type {declared!r}")


def _env_name(prompt_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", prompt_id).strip("_").upper() or "INPUT"


def _safe_id(name: str) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-._")[:64]
    return cleaned or "server"

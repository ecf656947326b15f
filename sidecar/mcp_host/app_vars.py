"""Each app's own variables in a server entry, turned into what the sidecar means by them.

The sidecar's ``${NAME}`` is resolved when the server connects (the secret store, then the
environment), so a variable that names the environment stays a reference and is never copied in:
VS Code's and Cursor's ``${env:X}`` and Claude Code's ``${X}`` become ``${X}``. What only the app
knows is filled in now: ``${userHome}``, ``${workspaceFolder}`` (the project the file belongs to),
``${pathSeparator}``. A value the app asks the user for (VS Code's ``${input:id}``) or reads from a
file (Windsurf's ``${file:...}``) becomes a named secret the user sets with ``secrets/set``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from .config_text import ConfigError

Source = Literal["claude", "claudeCode", "vscode", "cursor", "windsurf", "zed", "goose"]

# ${name} or ${scheme:rest}: VS Code's and Cursor's syntax.
_EDITOR = re.compile(r"\$\{([A-Za-z]+)(?::([^}]*))?\}|\$\{/\}")
# Claude Code's ${VAR} and ${VAR:-default} (the default may hold anything but a closing brace).
_SHELL = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class Input:
    """A value the app asked its user for, now a secret to set."""

    name: str  # the secret's name (secrets/set)
    prompt_id: str
    description: str | None = None
    password: bool = False


def secret_name(text: str) -> str:
    """``perplexity-key`` -> ``PERPLEXITY_KEY``: a name the secret store takes."""
    name = re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_").upper()[:120] or "INPUT"
    return name if not name[0].isdigit() else f"INPUT_{name}"


def inputs_of(raw: Any) -> dict[str, Input]:
    """VS Code's ``inputs`` list: prompt id -> the secret that stands in for the prompt."""
    out: dict[str, Input] = {}
    for item in raw if isinstance(raw, list) else ():
        if isinstance(item, dict) and isinstance(item.get("id"), str):
            desc = item.get("description")
            out[item["id"]] = Input(secret_name(item["id"]), item["id"],
                                    desc if isinstance(desc, str) else None, item.get("password") is True)
    return out


class Expander:
    """Reads one entry's strings as the sidecar will use them; what cannot carry over is said
    in ``warnings``, and the secrets the user must set in ``asked``."""

    def __init__(self, source: Source, *, project: Path | None = None, inputs: dict[str, Input] | None = None,
                 known: Callable[[str], bool] = lambda name: name in os.environ) -> None:
        self.source = source
        self.project = project
        self.inputs = inputs or {}
        self.known = known
        self.warnings: list[str] = []
        self.asked: dict[str, Input] = {}

    def value(self, text: str, where: str) -> str:
        if "$" not in text:
            return text
        if self.source in ("vscode", "cursor", "windsurf"):
            return _EDITOR.sub(lambda m: self._editor(m, where), text)
        if self.source == "claudeCode":
            return _SHELL.sub(lambda m: self._shell(m, where), text)
        return text  # Claude Desktop, Zed and goose pass values as written

    def _editor(self, m: re.Match[str], where: str) -> str:
        if m[0] == "${/}":
            return os.sep
        name, arg = m[1], m[2]
        if arg is None:
            if name == "userHome":
                return str(Path.home())
            if name == "pathSeparator":
                return os.sep
            if name in ("workspaceFolder", "workspaceFolderBasename", "workspaceRoot"):
                if self.project is None:  # left as ${workspaceFolder} it would be asked for as a secret
                    raise ConfigError(f"{where} uses ${{{name}}}, and this file belongs to no workspace: preview "
                                      "it again with project, the folder it should mean")
                return self.project.name if name == "workspaceFolderBasename" else str(self.project)
        elif name == "env" and _NAME.match(arg):
            return "${" + arg + "}"
        elif name == "input" and self.source == "vscode":
            asked = self.inputs.get(arg) or Input(secret_name(arg), arg)
            self.asked[asked.name] = asked
            return "${" + asked.name + "}"
        elif name == "file" and self.source == "windsurf":
            asked = Input(secret_name(Path(arg).stem or arg), arg, f"the content of {arg}", password=True)
            self.asked[asked.name] = asked
            self.warnings.append(f"{where} read the file {arg}; store its content as the secret "
                                 f"{asked.name} with secrets/set")
            return "${" + asked.name + "}"
        self.warnings.append(f"{where} uses {m[0]}, which only the app itself can fill in; edit it after import")
        return m[0]

    def _shell(self, m: re.Match[str], where: str) -> str:
        name, default = m[1], m[2]
        if default is None or self.known(name):
            return "${" + name + "}"
        self.warnings.append(f"{where}: {name} is not set, so its default {default!r} is used "
                             f"(store {name} with secrets/set to use your own)")
        return default

    def mapping(self, raw: Any, where: str) -> dict[str, str]:
        if raw is None:
            return {}
        if not isinstance(raw, dict):
            raise ConfigError(f"{where} is not an object")
        return {str(k): self.value(scalar(v, f"{where}.{k}"), f"{where}.{k}") for k, v in raw.items()}

    def strings(self, raw: Any, where: str) -> list[str]:
        if raw is None:
            return []
        if not isinstance(raw, list):
            raise ConfigError(f"{where} is not a list")
        return [self.value(scalar(v, f"{where}[{i}]"), f"{where}[{i}]") for i, v in enumerate(raw)]


def scalar(v: Any, where: str) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if not isinstance(v, (str, int, float)):
        raise ConfigError(f"{where} is not a string")
    return str(v)

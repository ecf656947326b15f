"""Package runners: the commands that download a server before they run it (npx, uvx, ...).

A stdio server configured as ``npx -y @modelcontextprotocol/server-memory`` or ``uvx mcp-server-time``
spends its first start installing (25-85 s on a fresh machine), silent on stdout, before it can answer
the MCP handshake. Recognising the runner lets that first start have an install budget instead of the
connect timeout, be reported as ``installing``, and be stopped gently (npm rolls a half-done install
back on SIGTERM; on SIGKILL it leaves a lock and a half-filled folder behind, see ``npx_cache.py``).

Cheap to import (no SDK, no I/O).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["Runner", "recognise", "runner_env"]


@dataclass(frozen=True)
class Runner:
    name: str
    """npx, uvx, pipx, bunx, pnpm or docker."""
    packages: tuple[str, ...]
    """The package specs (or the image) as the arguments give them, in their order."""

    @property
    def package(self) -> str | None:
        return self.packages[0] if self.packages else None


# Options of each runner that take a value (so the value is not mistaken for the package).
_NPX_VALUED = frozenset({"-p", "--package", "-c", "--call", "--cache", "--registry", "--userconfig", "-w",
                         "--workspace"})
_UVX_VALUED = frozenset({"--from", "--with", "--with-editable", "--with-requirements", "-p", "--python",
                         "--index", "--default-index", "--index-url", "--extra-index-url", "-i", "--cache-dir",
                         "--directory", "--project", "--config-file", "-C", "--config-setting", "--env-file",
                         "--constraint", "--override", "--build-constraint", "--refresh-package",
                         "--reinstall-package", "--upgrade-package", "-P", "--python-platform", "--exclude-newer"})
_PIPX_VALUED = frozenset({"--spec", "--python", "--pip-args", "--index-url", "-i", "--fetch-python"})
_BUNX_VALUED = frozenset({"-p", "--package"})
_PNPM_VALUED = frozenset({"--package", "--registry", "-C", "--dir"})
_DOCKER_VALUED = frozenset({
    "-a", "--attach", "--add-host", "--cidfile", "--cpus", "--cpu-shares", "-c", "--device", "--dns", "-e",
    "--env", "--env-file", "--entrypoint", "--gpus", "-h", "--hostname", "--init-path", "--ip", "-l",
    "--label", "--log-driver", "--log-opt", "-m", "--memory", "--mount", "--name", "--network", "--net",
    "--platform", "-p", "--publish", "--pull", "--restart", "--runtime", "--security-opt", "--shm-size",
    "--stop-signal", "--stop-timeout", "--tmpfs", "-u", "--user", "--ulimit", "-v", "--volume",
    "--volumes-from", "-w", "--workdir", "--cap-add", "--cap-drop", "--group-add", "--pid", "--ipc",
    "--uts", "--userns", "--cgroupns", "--health-cmd", "--label-file", "--network-alias", "--pids-limit"})


def _program(command: str) -> str:
    name = os.path.basename(command.replace("\\", "/")).lower()
    for suffix in (".cmd", ".exe", ".bat", ".ps1"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def _first_positional(args: Sequence[str], valued: frozenset[str]) -> tuple[int, str] | None:
    skip = False
    for i, arg in enumerate(args):
        if skip:
            skip = False
            continue
        if arg == "--":
            return (i + 1, args[i + 1]) if i + 1 < len(args) else None
        if arg.startswith("-"):
            if "=" not in arg and arg in valued:
                skip = True
            continue
        return i, arg
    return None


def _option_values(args: Sequence[str], names: frozenset[str]) -> list[str]:
    """The values of ``--package x`` / ``--package=x`` / ``-p x`` before the command itself."""
    out: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--" or not arg.startswith("-"):
            break
        name, eq, value = arg.partition("=")
        if name in names:
            if eq:
                out.append(value)
            elif i + 1 < len(args):
                out.append(args[i + 1])
                i += 1
        i += 1
    return out


def recognise(command: str | None, args: Sequence[str]) -> Runner | None:
    """The package runner ``command args`` starts, or None for a program run directly."""
    if not command:
        return None
    program = _program(command)
    if program == "npx":
        given = _option_values(args, frozenset({"-p", "--package"}))
        if given:
            return Runner("npx", tuple(given))
        found = _first_positional(args, _NPX_VALUED)
        return Runner("npx", (found[1],) if found else ())
    if program == "uvx" or (program == "uv" and args[:2] == ["tool", "run"]):
        rest = list(args[2:]) if program == "uv" else list(args)
        given = _option_values(rest, frozenset({"--from"}))
        found = _first_positional(rest, _UVX_VALUED)
        return Runner("uvx", tuple(given) or ((found[1],) if found else ()))
    if program == "bunx" or (program == "bun" and args[:1] == ["x"]):
        rest = list(args[1:]) if program == "bun" else list(args)
        found = _first_positional(rest, _BUNX_VALUED)
        return Runner("bunx", (found[1],) if found else ())
    sub = _first_positional(args, frozenset())
    if sub is None:
        return None
    at, word = sub
    rest = list(args[at + 1:])
    if program == "pipx" and word == "run":
        given = _option_values(rest, frozenset({"--spec"}))
        found = _first_positional(rest, _PIPX_VALUED)
        return Runner("pipx", tuple(given) or ((found[1],) if found else ()))
    if program == "pnpm" and word == "dlx":
        found = _first_positional(rest, _PNPM_VALUED)
        return Runner("pnpm", (found[1],) if found else ())
    if program in ("docker", "podman") and word == "run":
        found = _first_positional(rest, _DOCKER_VALUED)
        return Runner("docker", (found[1],) if found else ())
    return None


def runner_env(runner: Runner, env: Mapping[str, str]) -> dict[str, str]:
    """What to add to a runner's environment so its install says how it goes on stderr: npm is
    silent at its default level, and at ``http`` prints one line per registry fetch (which the
    user's own ``npm_config_loglevel`` overrides)."""
    if runner.name == "npx" and not any(k.lower() == "npm_config_loglevel" for k in env):
        return {"npm_config_loglevel": "http"}
    return {}

"""The sandbox settings as people write them, turned into one ``policy.Patch``.

Two places write them the same way: ``toolset.yaml`` (per toolset and per tool, seed 004's
``constraints: {timeout_seconds}`` and ``sandbox: {memory, network, allowedHosts, writable,
processes, disk}``) and the user's overrides (tools/setOverride, toolsets/setLimits). A mistake is
a ``SettingError`` naming the key and saying what to write instead.

A writable path must be absolute and may not be ``/``, the user's whole home folder, or the
sidecar's data directory (which holds the database with the provider keys and every chat's
workspace) nor a folder containing it: granting one of those would undo the sandbox.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import msgspec

from .policy import MAX_MEMORY, MAX_PROCESSES, MAX_TIMEOUT, Patch, check_host, parse_size

MIN_MEMORY = 32 << 20  # a Python worker needs about 25 MiB before it runs a line of a tool
MAX_DISK = 1 << 40
NETWORKS = ("none", "allowedHosts", "full")
CONSTRAINT_KEYS = ("timeout_seconds",)
SANDBOX_KEYS = ("memory", "network", "allowedHosts", "writable", "processes", "disk")
# Seed 004 names Docker's network modes; what each means here.
_DOCKER_NETWORKS = {"bridge": "full", "host": "full"}


class SettingError(ValueError):
    """``where``: the key inside the block (``sandbox.memory``); ``reason``: what to fix."""

    def __init__(self, where: str, reason: str) -> None:
        super().__init__(f"{where}: {reason}")
        self.where = where
        self.reason = reason


def layer(constraints: Any, sandbox: Any, *, data_dir: Path | None = None) -> tuple[Patch, list[str]]:
    """One layer from a ``constraints`` and a ``sandbox`` block (either may be None), and the
    notes worth a warning (a seed 004 key accepted but not enforced)."""
    notes: list[str] = []
    fields: dict[str, Any] = {}
    if constraints is not None:
        if not isinstance(constraints, dict):
            raise SettingError("constraints", "a mapping: constraints: {timeout_seconds: 30}")
        for key, value in constraints.items():
            if key == "timeout_seconds":
                fields["timeout_seconds"] = _timeout(value)
            elif key == "cost_budget":
                notes.append("constraints.cost_budget is not enforced here; it is ignored")
            else:
                raise SettingError(f"constraints.{key}", "not a constraint; constraints takes timeout_seconds")
    if sandbox is not False and sandbox is not None:
        fields.update(_sandbox(sandbox, data_dir))
    return Patch(**fields), notes


def _sandbox(sandbox: Any, data_dir: Path | None) -> dict[str, Any]:
    if not isinstance(sandbox, dict):
        raise SettingError("sandbox", "a mapping of memory, network, allowedHosts, writable, processes, disk")
    fields: dict[str, Any] = {}
    for key, value in sandbox.items():
        if value is None:
            continue
        if key == "memory":
            fields["memory_bytes"] = _size("sandbox.memory", value, MIN_MEMORY, MAX_MEMORY)
        elif key == "disk":
            fields["disk_bytes"] = _size("sandbox.disk", value, 1 << 20, MAX_DISK)
        elif key == "processes":
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_PROCESSES:
                raise SettingError("sandbox.processes", f"a whole number from 1 to {MAX_PROCESSES} (default 64)")
            fields["max_processes"] = value
        elif key == "network":
            fields["network"] = _network(value)
        elif key in ("allowedHosts", "allowed_hosts"):
            fields["allowed_hosts"] = _hosts(value)
        elif key == "writable":
            fields["writable"] = _writable(value, data_dir)
        else:
            raise SettingError(f"sandbox.{key}", f"not a sandbox setting; sandbox takes {', '.join(SANDBOX_KEYS)}")
    hosts, network = fields.get("allowed_hosts"), fields.get("network")
    if hosts and network is None:
        fields["network"] = "allowedHosts"  # the list says what is meant
    elif hosts and network != "allowedHosts":
        raise SettingError("sandbox.allowedHosts", f"listed with network: {network}; set network: allowedHosts "
                                                   "to confine the tool to these hosts, or drop the list")
    return fields


def _timeout(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
            or not 0 < value <= MAX_TIMEOUT:
        raise SettingError("constraints.timeout_seconds", f"seconds, more than 0 and at most {MAX_TIMEOUT:g} "
                                                          "(default 9)")
    return float(value)


def _size(where: str, value: Any, least: int, most: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise SettingError(where, "a size: bytes, or a number with k, m or g (e.g. 512m, 1g)")
    try:
        size = parse_size(value)
    except ValueError as exc:
        raise SettingError(where, str(exc)) from None
    if not least <= size <= most:
        raise SettingError(where, f"{value!r} is out of range: from {least >> 20}m to {most >> 30}g")
    return size


def _network(value: Any) -> str:
    if value in NETWORKS:
        return str(value)
    if value in _DOCKER_NETWORKS:
        raise SettingError("sandbox.network", f"{value!r} is a Docker network mode; write "
                                              f"{_DOCKER_NETWORKS[value]!r} (any host) or allowedHosts (listed ones)")
    raise SettingError("sandbox.network", f"{value!r} is not a network setting; write none (the default), "
                                          "allowedHosts (only the hosts listed in allowedHosts) or full")


def _hosts(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise SettingError("sandbox.allowedHosts", "a list of host names: [api.example.com, '*.example.org:443']")
    found: list[str] = []
    for i, host in enumerate(value):
        try:
            found.append(check_host(host) if isinstance(host, str) else check_host(repr(host)))
        except ValueError as exc:
            raise SettingError(f"sandbox.allowedHosts[{i}]", str(exc)) from None
    return tuple(dict.fromkeys(found))


def _writable(value: Any, data_dir: Path | None) -> tuple[str, ...]:
    if value is True:
        raise SettingError("sandbox.writable", "list the folders the tool may write besides its chat's workspace "
                                               "(absolute paths); true would be the whole filesystem")
    if value is False:
        return ()
    if not isinstance(value, list):
        raise SettingError("sandbox.writable", "a list of absolute paths: [/srv/reports]")
    found: list[str] = []
    for i, path in enumerate(value):
        try:
            found.append(check_writable(path, data_dir))
        except ValueError as exc:
            raise SettingError(f"sandbox.writable[{i}]", str(exc)) from None
    return tuple(dict.fromkeys(found))


def check_writable(path: Any, data_dir: Path | None = None) -> str:
    """One writable path, normalised; ValueError saying why it is refused."""
    if not isinstance(path, str) or not path.strip():
        raise ValueError("a path: an absolute folder such as /srv/reports")
    if path.startswith("~"):
        raise ValueError(f"{path!r}: write the absolute path; '~' is not expanded")
    if not os.path.isabs(path):
        raise ValueError(f"{path!r} is relative; a writable path is absolute (the chat's workspace is "
                         "writable already)")
    if ".." in Path(path).parts:
        raise ValueError(f"{path!r} holds '..'; write the folder it means")
    clean = os.path.normpath(path)
    clean = "/" + clean.lstrip("/") if clean.startswith("//") else clean
    if clean == "/":
        raise ValueError("'/' is the whole filesystem; list the folders the tool needs")
    home = os.path.expanduser("~")
    if home not in ("", "/") and clean == os.path.normpath(home):
        raise ValueError(f"{clean!r} is the whole home folder (keys, browser profiles); list the folders "
                         "the tool needs")
    if data_dir is not None:
        data = os.path.normpath(os.path.realpath(data_dir))
        for candidate in {clean, os.path.realpath(clean)}:
            if candidate == data or candidate.startswith(data + os.sep):
                raise ValueError(f"{clean!r} is inside the app's data directory ({data}), which holds the "
                                 "database, its keys and every chat's workspace")
            if data.startswith(candidate.rstrip(os.sep) + os.sep):
                raise ValueError(f"{clean!r} contains the app's data directory ({data}), which holds the "
                                 "database, its keys and every chat's workspace")
    return clean


def to_blocks(patch: Patch) -> dict[str, Any]:
    """``patch`` as toolset.yaml writes it: ``{constraints: {...}, sandbox: {...}}`` (empty ones left out)."""
    constraints = {"timeout_seconds": patch.timeout_seconds} if patch.timeout_seconds is not None else {}
    sandbox = {k: v for k, v in (("memory", patch.memory_bytes), ("network", patch.network),
                                  ("allowedHosts", list(patch.allowed_hosts) if patch.allowed_hosts is not None
                                   else None),
                                  ("writable", list(patch.writable) if patch.writable is not None else None),
                                  ("processes", patch.max_processes), ("disk", patch.disk_bytes))
               if v is not None}
    return {k: v for k, v in (("constraints", constraints), ("sandbox", sandbox)) if v}


def stored(patch: Patch) -> dict[str, Any] | None:
    """``patch`` as a JSON column keeps it (None: it sets nothing)."""
    data = msgspec.to_builtins(patch)
    return data or None


def from_stored(data: Any) -> Patch | None:
    return msgspec.convert(data, Patch) if data else None


def merge(old: Patch | None, changes: dict[str, Any]) -> Patch:
    """``old`` with ``changes`` (Patch field -> value, None clearing that field) applied."""
    values = msgspec.structs.asdict(old) if old is not None else {}
    values.update(changes)
    return Patch(**values)

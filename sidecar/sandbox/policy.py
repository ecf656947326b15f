"""What a confined tool process may do, and how the layers that set it combine.

Seed 004's defaults come first; a toolset's manifest may change them for the toolset and for each
tool (``constraints.timeout_seconds`` and ``sandbox: {memory, network, allowedHosts, writable}``);
the user's overrides (toolset, then tool) win over the manifest. Each layer is a ``Patch`` whose
unset fields leave the layer below alone; ``resolve`` folds them into one ``Confinement``.

Anything wider than the defaults (network, extra writable paths, more memory, processes or time)
is a ``Widening``: ``toolsets/inspect`` shows them as warnings before install.
"""

from __future__ import annotations

import re
from typing import Literal

import msgspec

Network = Literal["none", "allowedHosts", "full"]

DEFAULT_TIMEOUT = 9.0  # seconds (seed 004)
DEFAULT_MEMORY = 256 << 20  # bytes (seed 004)
DEFAULT_PROCESSES = 64  # seed 004's PID limit
DEFAULT_DISK = 1 << 30  # bytes one call may add to its workspace
MAX_TIMEOUT = 3600.0
MAX_MEMORY = 64 << 30
MAX_PROCESSES = 4096

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_HOST = re.compile(r"^(\*\.)?[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}"
                   r"[A-Za-z0-9])?)*(?::\d{1,5})?$")


class Confinement(msgspec.Struct, frozen=True, kw_only=True):
    """The effective limits of one tool: every field set."""

    timeout_seconds: float = DEFAULT_TIMEOUT
    memory_bytes: int = DEFAULT_MEMORY
    max_processes: int = DEFAULT_PROCESSES
    disk_bytes: int = DEFAULT_DISK
    network: Network = "none"
    allowed_hosts: tuple[str, ...] = ()  # host or host:port, '*.' prefix for subdomains; with allowedHosts
    writable: tuple[str, ...] = ()  # absolute paths writable besides the chat's workspace


DEFAULT = Confinement()


class Patch(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One layer's changes (manifest or user override); None leaves the layer below."""

    timeout_seconds: float | None = None
    memory_bytes: int | None = None
    max_processes: int | None = None
    disk_bytes: int | None = None
    network: Network | None = None
    allowed_hosts: tuple[str, ...] | None = None
    writable: tuple[str, ...] | None = None


class Widening(msgspec.Struct, frozen=True):
    field: str  # wire name, e.g. "sandbox.network"
    message: str  # says what the tool gains


def resolve(*layers: Patch | None) -> Confinement:
    """Fold ``layers`` (lowest first) over the defaults."""
    values = msgspec.structs.asdict(DEFAULT)
    for layer in layers:
        if layer is None:
            continue
        for name, value in msgspec.structs.asdict(layer).items():
            if value is not None:
                values[name] = value
    return Confinement(**values)


def widenings(c: Confinement) -> list[Widening]:
    """What ``c`` allows beyond seed 004's defaults, worded for a warning before install."""
    found: list[Widening] = []
    if c.network == "full":
        found.append(Widening("sandbox.network", "may connect to any host on the network and the internet"))
    elif c.network == "allowedHosts":
        found.append(Widening("sandbox.network", f"may connect to {', '.join(c.allowed_hosts) or 'no host'}"))
    for path in c.writable:
        found.append(Widening("sandbox.writable", f"may write to {path} outside its chat's workspace"))
    if c.memory_bytes > DEFAULT.memory_bytes:
        found.append(Widening("sandbox.memory", f"may use {format_size(c.memory_bytes)} of memory "
                              f"(default {format_size(DEFAULT.memory_bytes)})"))
    if c.max_processes > DEFAULT.max_processes:
        found.append(Widening("sandbox.processes", f"may run {c.max_processes} processes "
                              f"(default {DEFAULT.max_processes})"))
    if c.timeout_seconds > DEFAULT.timeout_seconds:
        found.append(Widening("constraints.timeout_seconds", f"may run for {c.timeout_seconds:g} s "
                              f"(default {DEFAULT.timeout_seconds:g} s)"))
    return found


def parse_size(text: str | int) -> int:
    """'256m', '1g', '512MiB' or a number of bytes; ValueError saying the forms otherwise."""
    if isinstance(text, int) and not isinstance(text, bool):
        if text <= 0:
            raise ValueError("a size must be positive")
        return text
    match = _SIZE.match(str(text))
    if not match:
        raise ValueError(f"{text!r} is not a size: write bytes or a number with k, m or g (e.g. 256m, 1g)")
    size = int(float(match.group(1)) * _UNITS[match.group(2).lower()])
    if size <= 0:
        raise ValueError("a size must be positive")
    return size


def format_size(size: int) -> str:
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= factor and size % (factor >> 4) == 0:
            return f"{size / factor:g} {unit}"
    return f"{size} bytes"


def check_host(host: str) -> str:
    """One ``allowedHosts`` entry, lower-cased; ValueError saying the form otherwise."""
    if not _HOST.match(host):
        raise ValueError(f"{host!r} is not a host name: write 'api.example.com', 'api.example.com:443' "
                         "or '*.example.com'")
    return host.lower()


def host_allowed(allowed: tuple[str, ...], host: str, port: int) -> bool:
    """Whether a connection to ``host:port`` is within ``allowed``."""
    host = host.lower().rstrip(".")
    for entry in allowed:
        name, _, want_port = entry.partition(":")
        if want_port and int(want_port) != port:
            continue
        if name.startswith("*."):
            if host.endswith(name[1:]) and host != name[2:]:
                return True
        elif host == name:
            return True
    return False

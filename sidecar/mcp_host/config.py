"""What the sidecar hands the host for one MCP server.

A `ServerConfig` is plain data taken from `toolset_mcp_servers`. Its `env` values, `args`, `url` and
`headers` values may hold `${VAR}` references; they are resolved when the host connects (the user's
secrets first, then the process environment; never stored resolved), so a secret lives in the secret
store or the user's environment and an export keeps the placeholder. A reference to a variable that
is not set is a `secrets.MissingVariable`, which the host turns into an `error` state on that server.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

import msgspec

from ..api.mcp import DEFAULT_INSTALL_TIMEOUT, LogLevel, ServerSandbox, ServerType
from ..sandbox.policy import Confinement, resolve
from ..sandbox.settings import SettingError, layer

log = logging.getLogger(__name__)

DEFAULT_CONNECT_TIMEOUT = 30.0  # seconds a server gets to connect (and a sign-out to finish)


@dataclass(frozen=True)
class ServerConfig:
    """One MCP server as the sidecar wants it. Equality decides whether `McpHost.sync` restarts it."""

    server_id: str
    toolset_id: str
    type: ServerType
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    """Extra environment for a stdio child, over the scrubbed base. Values may hold `${VAR}`."""
    cwd: str | None = None
    env_passthrough: tuple[str, ...] = ()
    """Names of the sidecar's environment this stdio child also gets (beyond ``secrets/inherited.py``'s list)."""
    url: str | None = None
    """Endpoint of an `sse` or `streamable-http` server. May hold `${VAR}`."""
    headers: Mapping[str, str] = field(default_factory=dict)
    """HTTP headers for `sse` / `streamable-http`. Values may hold `${VAR}`."""
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    call_timeout: float = 120.0
    install_timeout: float = DEFAULT_INSTALL_TIMEOUT
    """A package runner's (npx, uvx, ...) first start: how long it may install before its handshake."""
    enabled: bool = True
    log_level: LogLevel | None = None
    """The least severe log message wanted (sent with logging/setLevel, applied to what arrives)."""
    sandbox: Confinement | None = None
    """A stdio server the user opted into the OS sandbox (option ``sandbox``); None runs it as is."""

    @property
    def key(self) -> str:
        """The server key `toolset~server`: the host's identity for the server."""
        return f"{self.toolset_id}~{self.server_id}"

    def __post_init__(self) -> None:
        # Frozen for real: a caller mutating its dict afterwards must not change a config in use.
        object.__setattr__(self, "args", tuple(self.args))
        object.__setattr__(self, "env_passthrough", tuple(self.env_passthrough))
        object.__setattr__(self, "env", MappingProxyType(dict(self.env)))
        object.__setattr__(self, "headers", MappingProxyType(dict(self.headers)))

    def __hash__(self) -> int:  # mappings are not hashable; hash what identifies the server
        return hash((self.key, self.type, self.command, self.args, self.url))


def sandbox_of(block: ServerSandbox | None) -> Confinement | None:
    """The confinement a stored server runs under (None: unconfined). Its block was checked when it
    was written; one that fails the check now (written by an older version) confines the server to
    the defaults and says why in the log, so it never widens anything."""
    if block is None:
        return None
    try:
        patch, _ = layer(None, msgspec.to_builtins(block))
    except SettingError as exc:
        log.warning("the sandbox option of an MCP server was refused (%s): it runs with seed 004's defaults, "
                    "no network", exc)
        return Confinement()
    return resolve(patch)

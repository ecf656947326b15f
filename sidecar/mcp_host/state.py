"""What the host knows about each server: the snapshot it hands out, and the live record behind it.

Cheap to import (no SDK): the facade, the supervisor and the connector all share these.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio

from ..api.debug import SandboxMechanism
from ..api.mcp import InstallProgress, ServerStatus
from ..api.tools import ToolIcon
from ..secrets import clean
from .config import ServerConfig
from .logs import LogGate

if TYPE_CHECKING:  # the SDK is imported in a worker thread on first connect, never at start-up
    from mcp.client.session import ClientSession

    from .stdio import StdioTransport

log = logging.getLogger("sidecar.mcp_host")

Status = ServerStatus


@dataclass
class ServerState:
    """A snapshot of one server, safe to hand out (the host never mutates it)."""

    key: str
    server_id: str
    toolset_id: str
    type: str
    status: Status
    error: str | None = None
    """What went wrong, with the last lines of the server's stderr when it failed."""
    tool_count: int = 0
    server_name: str | None = None
    """The name the server gave in its initialize answer."""
    confined_by: SandboxMechanism | None = None
    """The sandbox mechanism of the running stdio child ("none": asked for, none available)."""
    runner: str | None = None
    """The package runner its command starts (npx, uvx, ...), once an attempt has looked."""
    install: InstallProgress | None = None
    """While installing: how it goes."""


OnStatus = Callable[[ServerState], Awaitable[None]]


@dataclass(frozen=True)
class McpTool:
    name: str
    title: str | None
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None
    annotations: dict[str, Any] | None
    icons: tuple[ToolIcon, ...] = ()


@dataclass(frozen=True)
class CallOrigin:
    """Who a request to a server is for: what a `ui/elicit` it causes names as its source."""

    chat_id: str | None = None
    tool_call_id: str | None = None


class CallClock:
    """A call's timeout, which stands still while the server waits on the user (elicitation)."""

    def __init__(self, timeout: float | None) -> None:
        self.timeout = math.inf if timeout is None or timeout <= 0 else timeout
        self.scope = anyio.CancelScope(deadline=anyio.current_time() + self.timeout)
        self._budget = self.timeout
        self._paused = 0

    def pause(self) -> None:
        if not self._paused:
            self._budget = self.scope.deadline - anyio.current_time()
            self.scope.deadline = math.inf
        self._paused += 1

    def resume(self) -> None:
        self._paused -= 1
        if not self._paused:
            self.scope.deadline = anyio.current_time() + self._budget


class Pending:
    """One request in flight on a server."""

    def __init__(self, clock: CallClock, origin: CallOrigin | None) -> None:
        self.clock = clock
        self.origin = origin
        self.refused_answer: str | None = None
        """Set when the user's answer to an elicitation of this request did not fit its form."""


class Conn:
    """One connection attempt and, once the handshake is done, the live connection."""

    def __init__(self) -> None:
        self.scope = anyio.CancelScope()
        self.lost = anyio.Event()
        self.tools_dirty = anyio.Event()
        self.session: ClientSession | None = None
        self.transport: StdioTransport | None = None
        self.notes: list[str] = []
        self.connected = False
        self.needs_user: str | None = None
        """Why only a sign-in would help, when the server's OAuth said so (its requests then fail)."""

    def sign_in_needed(self, reason: str) -> None:
        self.needs_user = reason
        self.lost.set()


class LiveServer:
    """One configured server as the host runs it. Replaced (never edited) when its config changes."""

    def __init__(self, config: ServerConfig, on_status: OnStatus | None, previous: LiveServer | None = None) -> None:
        self.config = config
        self.previous = previous
        self.current = True
        """False once a sync replaced or removed it: its news is stale from then on."""
        self.status: Status = "connecting" if config.enabled else "disabled"
        self.error: str | None = None
        self.server_name: str | None = None
        self.instructions: str | None = None
        """What the server's initialize answer says about using its tools (offered to the model)."""
        self.tools: list[McpTool] = []
        self.conn: Conn | None = None
        self.scope = anyio.CancelScope()
        self.done = anyio.Event()
        self.wake = anyio.Event()
        self.force = False
        self.pending: set[Pending] = set()
        self.log_gate = LogGate()
        self.elicits = 0
        self.runner: str | None = None
        self.installed = False
        """It connected once: the runner's package is in its cache, later starts get the connect timeout."""
        self.install: InstallProgress | None = None
        self._on_status = on_status
        self._last_published: ServerState | None = None
        self._changed = anyio.Event()

    @property
    def label(self) -> str:
        return self.config.key

    def snapshot(self) -> ServerState:
        c = self.config
        transport = self.conn.transport if self.conn is not None and self.status == "connected" else None
        return ServerState(key=c.key, server_id=c.server_id, toolset_id=c.toolset_id, type=c.type,
                           status=self.status, error=self.error, tool_count=len(self.tools),
                           server_name=self.server_name,
                           confined_by=transport.confined_by if transport is not None else None,
                           runner=self.runner, install=self.install if self.status == "installing" else None)

    @property
    def ready(self) -> bool:
        """Connected, with a connection that has not been lost."""
        return self.status == "connected" and self.conn is not None and not self.conn.lost.is_set()

    @property
    def settling(self) -> bool:
        """(Re)connecting: a request now would rather wait for it than fail."""
        return not self.done.is_set() and (self.status in ("connecting", "installing")
                                           or (self.status == "connected" and not self.ready))

    def changed(self) -> None:
        """Wake whoever waits in `wait_changed` (status, connection or supervisor end)."""
        event, self._changed = self._changed, anyio.Event()
        event.set()

    async def wait_changed(self) -> None:
        await self._changed.wait()

    async def set_status(self, status: Status, error: str | None = None) -> None:
        # Every error shown in lists and mcpServers/status passes here: it may quote what the server
        # printed or what a library saw, so it is masked once, at the source.
        self.status, self.error = status, clean(error) if error else error
        if status != "installing":
            self.install = None
        if status != "connected":
            self.tools = []
        self.changed()
        await self.publish()

    async def set_install(self, progress: InstallProgress) -> None:
        """The runner's install went on: status installing with ``progress`` (an mcpServers/status)."""
        self.install = progress
        await self.set_status("installing")

    async def publish(self, *, tools_changed: bool = False) -> None:
        """Tell `on_status` about a change of the snapshot (only a real one, never stale news), or
        that the tools were re-listed (`tools_changed`: news even when their count stayed)."""
        if not self.current:
            return
        state = self.snapshot()
        if state == self._last_published and not tools_changed:
            return
        self._last_published = state
        if self._on_status is not None:
            try:
                await self._on_status(state)
            except Exception:
                log.exception("on_status callback failed for %s", self.label)

"""`McpHost`: the facade over the MCP connections. See the package docstring for the contract.

It keeps the set of servers (`sync`), hands their states and tools out, and routes requests to a
connected session; supervision lives in `supervise`, connecting in `connect` and `session`,
requests in `requests`, the wording of failures in `failures`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
from anyio.abc import TaskGroup

from ..errors import McpError
from ..sandbox.runner import Sandbox
from .config import DEFAULT_CONNECT_TIMEOUT, ServerConfig
from .connect import Connector, OnToolsChanged, Variables, config_references, process_environment
from .elicitation import Elicit
from .failures import not_connected
from .logs import OnLog
from .signin import OpenUrl, Vault
from .state import CallOrigin, Conn, LiveServer, McpTool, OnStatus, ServerState
from .supervise import supervise

if TYPE_CHECKING:  # the SDK is imported in a worker thread on first connect, never at start-up
    from mcp.client.session import ClientSession

    from .requests import OnProgress

log = logging.getLogger(__name__)

DEFAULT_MAX_RESULT_BYTES = 32 << 20
STOP_DEADLINE = 10.0


class McpHost:
    """Holds the MCP connections of the sidecar. See the package docstring."""

    def __init__(self, *, on_status: OnStatus | None = None, on_tools_changed: OnToolsChanged | None = None,
                 elicit: Elicit | None = None, max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
                 variables: Variables = process_environment, on_log: OnLog | None = None,
                 vault: Vault | None = None, open_url: OpenUrl | None = None,
                 client_metadata_url: str | None = None, sandbox: Sandbox | None = None,
                 installs: Path | None = None) -> None:
        self._on_status = on_status
        self._connector = Connector(max_result_bytes=max_result_bytes, on_tools_changed=on_tools_changed,
                                    elicit=elicit, variables=variables, on_log=on_log, vault=vault,
                                    open_url=open_url, client_metadata_url=client_metadata_url,
                                    sandbox=sandbox, installs=installs)
        self._tg: TaskGroup | None = None
        self._servers: dict[str, LiveServer] = {}
        self._live: set[LiveServer] = set()  # every server whose supervisor has not finished, removed ones too
        self._closed = False

    def bind(self, tg: TaskGroup) -> None:
        """Give the host the task group its connections live in (the sidecar's)."""
        self._tg = tg

    async def sync(self, configs: Iterable[ServerConfig]) -> None:
        """Make the running set match `configs`; returns at once, connections happen in the background."""
        if self._tg is None:
            raise RuntimeError("McpHost.bind(task_group) must come before sync()")
        if self._closed:  # a late sync during shutdown: nothing may start any more
            log.debug("McpHost.sync after aclose: ignored")
            return
        desired: dict[str, ServerConfig] = {}
        for config in configs:
            if config.key in desired:
                log.warning("MCP server %s is configured twice; the last one wins", config.key)
            desired[config.key] = config
        for key in [k for k in self._servers if k not in desired]:
            srv = self._servers.pop(key)
            log.info("MCP server %s removed", key)
            self._stop(srv)
        announce: list[LiveServer] = []
        for key, config in desired.items():
            old = self._servers.get(key)
            if old is not None and old.config == config:
                continue
            if old is not None:
                log.info("MCP server %s %s", key, "changed: restarting" if config.enabled else "disabled")
                self._stop(old)
            srv = LiveServer(config, self._on_status, previous=old)
            self._servers[key] = srv
            if not config.enabled:
                srv.done.set()
                announce.append(srv)
            else:
                self._live.add(srv)
                self._tg.start_soon(self._supervise, srv, name=f"mcp {key}")
        for srv in announce:
            await srv.publish()

    def states(self) -> list[ServerState]:
        return [srv.snapshot() for srv in self._servers.values()]

    def state(self, key: str) -> ServerState:
        return self._servers[key].snapshot()

    def tools(self, key: str) -> list[McpTool]:
        srv = self._servers.get(key)
        if srv is None or srv.status != "connected":
            return []
        return list(srv.tools)

    def listings(self) -> list[tuple[str, list[McpTool] | None]]:
        """Each server's list of tools as it holds it (None unless connected). A server's list is
        replaced, never edited, when it lists its tools again, so comparing the lists by identity
        tells whether any server's tools changed without reading them (the search index does)."""
        return [(key, srv.tools if srv.status == "connected" else None) for key, srv in self._servers.items()]

    def instructions(self, key: str) -> str | None:
        """What a connected server said about using its tools (its initialize answer's `instructions`)."""
        srv = self._servers.get(key)
        return srv.instructions if srv is not None and srv.status == "connected" else None

    async def reconnect(self, key: str) -> None:
        """Force an immediate connection attempt (dropping the current connection, if any)."""
        srv = self._servers[key]
        if not srv.config.enabled or srv.done.is_set():
            return
        srv.force = True
        if srv.conn is not None:
            srv.conn.scope.cancel()
        srv.wake.set()
        await srv.set_status("connecting")

    async def login(self, key: str, client: dict[str, Any] | None = None) -> None:
        """Sign in to a remote server (OAuth, the browser step through the UI), then connect again
        and return once it is connected or has failed (bounded by its connect timeout).

        Raises:
            SignInFailed: the sign-in did not succeed (the server keeps its state).
        """
        srv = self._servers[key]
        await self._connector.sign_in(srv.config, client)
        await self.reconnect(key)
        await self.settle(key)

    async def logout(self, key: str) -> None:
        """Sign out of a server: its tokens are revoked where the authorization server allows it and
        forgotten, and it connects again (and so asks for a sign-in)."""
        srv = self._servers.get(key)
        await self._connector.sign_out(key, srv.config.connect_timeout if srv is not None else DEFAULT_CONNECT_TIMEOUT)
        if srv is not None and srv.config.enabled:
            await self.reconnect(key)

    async def variable_changed(self, name: str) -> None:
        """A variable was set or removed: every server that refers to it and is not connected (a
        missing variable is an error that waits for this) tries again now. A connected one keeps
        the value it started with until it reconnects."""
        for key, srv in list(self._servers.items()):
            if srv.status == "error" and name in config_references(srv.config):
                log.info("MCP server %s: %s changed; connecting again", key, name)
                await self.reconnect(key)

    async def settle(self, key: str) -> None:
        """Return once the server is not (re)connecting, or its connect timeout has passed: a
        call right after a crash waits for the restart instead of failing."""
        srv = self._servers.get(key)
        if srv is None or srv.ready:
            return  # the usual case, without arming a timeout
        with anyio.move_on_after(srv.config.connect_timeout):
            while srv.settling:
                await srv.wait_changed()

    async def prepare(self, key: str) -> None:
        """Warm a server's package (``mcpServers/prepare``): see `warm.prepare`."""
        from .warm import prepare  # small, but only for this request

        await prepare(self._servers[key], self._connector, self.reconnect)

    async def call_tool(self, key: str, name: str, args: dict[str, Any], *,
                        timeout: float | None = None,  # noqa: ASYNC109 - it stands still during elicitations
                        on_progress: OnProgress | None = None, origin: CallOrigin | None = None) -> dict[str, Any]:
        """Call a tool. Returns `{"content": [...], "structuredContent"?: ..., "isError": bool}`.

        `origin` names the chat and tool call it runs for: an elicitation the server sends meanwhile
        says so to the UI.

        Raises:
            McpError: see `McpError.kind`. Cancelling the awaiting task cancels the request at the server.
        """
        srv, conn, session = await self._ready(key)
        from . import requests  # mcp SDK and pydantic: loaded on the first connect

        return await requests.call_tool(srv, conn, session, name, args, timeout=timeout, on_progress=on_progress,
                                        origin=origin, limit=self._connector.max_result_bytes)

    async def list_resources(self, key: str) -> list[dict[str, Any]]:
        srv, conn, session = await self._ready(key)
        from . import requests  # mcp SDK and pydantic: loaded on the first connect

        return await requests.list_all(srv, conn, session, "resources")

    async def read_resource(self, key: str, uri: str) -> dict[str, Any]:
        srv, conn, session = await self._ready(key)
        from . import requests  # mcp SDK and pydantic: loaded on the first connect

        return await requests.read_resource(srv, conn, session, uri, self._connector.max_result_bytes)

    async def list_prompts(self, key: str) -> list[dict[str, Any]]:
        srv, conn, session = await self._ready(key)
        from . import requests  # mcp SDK and pydantic: loaded on the first connect

        return await requests.list_all(srv, conn, session, "prompts")

    async def get_prompt(self, key: str, name: str, args: dict[str, str]) -> dict[str, Any]:
        srv, conn, session = await self._ready(key)
        from . import requests  # mcp SDK and pydantic: loaded on the first connect

        return await requests.get_prompt(srv, conn, session, name, args, self._connector.max_result_bytes)

    async def aclose(self) -> None:
        """Stop every server and wait (bounded) until their processes are gone."""
        self._closed = True
        for srv in list(self._live):
            self._stop(srv)
        self._servers.clear()
        with anyio.CancelScope(shield=True), anyio.move_on_after(STOP_DEADLINE):
            for srv in list(self._live):
                await srv.done.wait()

    # -- internals -------------------------------------------------------------------------------------

    async def _ready(self, key: str) -> tuple[LiveServer, Conn, ClientSession]:
        await self.settle(key)
        srv = self._servers.get(key)
        if srv is None:
            raise McpError("not_connected", f"there is no MCP server {key!r}", server=key)
        conn = srv.conn
        if not srv.ready or conn is None or conn.session is None:
            raise McpError("not_connected", not_connected(srv.config.server_id, srv.status, srv.error), server=key)
        return srv, conn, conn.session

    async def _supervise(self, srv: LiveServer) -> None:
        try:
            await supervise(srv, self._connector.attempt)
        finally:
            self._live.discard(srv)

    def _stop(self, srv: LiveServer) -> None:
        srv.current = False
        srv.scope.cancel()

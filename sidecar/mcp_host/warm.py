"""``mcpServers/prepare``: warm a server's package ahead of use.

Chosen: connect, then (for a server that is off) disconnect. A package runner has no "install only"
that works for all of them (``npx -y pkg`` installs and runs in one go; ``uvx`` likewise; a ``docker
run`` pulls and runs), and a completed MCP handshake is the one proof that the install is whole and
the server starts. So prepare is the server's first connection with its install budget:

- an enabled server: its supervisor is already doing exactly that, so prepare waits for it (and
  starts a fresh attempt when it is waiting in ``error`` for its backoff); it stays connected;
- a server that is off: one attempt outside the supervisor, then stopped as any server is (stdin
  closed, then signals), its package left in the runner's cache; its status stays ``disabled``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable

import anyio

from ..errors import McpError, UpstreamError
from .connect import Connector
from .failures import Failure
from .state import Conn, LiveServer


def _bound(srv: LiveServer) -> float:
    return srv.config.install_timeout + srv.config.connect_timeout


async def prepare(srv: LiveServer, connector: Connector, reconnect: Callable[[str], Awaitable[None]]) -> None:
    """Return once ``srv`` has connected (once); raise UpstreamError with why it did not, or McpError
    timeout past its install budget."""
    key = srv.config.key
    if srv.config.enabled and not srv.done.is_set():
        if srv.ready:
            return
        if srv.status == "error":
            await reconnect(key)
        with anyio.move_on_after(_bound(srv)) as waited:
            while srv.settling:
                await srv.wait_changed()
        if srv.ready:
            return
        if waited.cancelled_caught:
            raise McpError("timeout", f"it did not connect within {_bound(srv):g} s", server=key)
        raise UpstreamError("mcp", srv.error or f"it is {srv.status}", key)
    await _once(srv, connector)


async def _once(srv: LiveServer, connector: Connector) -> None:
    probe = LiveServer(dataclasses.replace(srv.config, enabled=True), None)
    probe.current = False  # its news is nobody's: the server itself stays off
    conn = Conn()
    failure: list[Failure] = []
    ended = anyio.Event()

    async def attempt() -> None:
        try:
            await connector.attempt(probe, conn)
        except Failure as exc:
            failure.append(exc)
        finally:
            ended.set()
            probe.changed()

    waited = anyio.move_on_after(_bound(probe))
    connected = False
    async with anyio.create_task_group() as tg:
        tg.start_soon(attempt)
        with waited:
            while not conn.connected and not ended.is_set():
                await probe.wait_changed()
        connected = conn.connected
        conn.scope.cancel()  # stops it: it was only warming the package
    if connected:
        return
    if waited.cancelled_caught:
        raise McpError("timeout", f"it did not connect within {_bound(probe):g} s", server=srv.config.key)
    raise UpstreamError("mcp", failure[0].message if failure else "it did not connect", srv.config.key)

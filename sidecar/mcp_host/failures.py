"""Why a connection failed, in words for the user (URLs masked: they may carry tokens)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio

from ..children import exit_reason
from ..secrets import clean, mask_url, scrub
from .config import ServerConfig
from .state import Conn

if TYPE_CHECKING:
    from .stdio import StdioTransport


class Failure(Exception):
    """One connection attempt ended; `message` is for the user."""

    def __init__(self, message: str, *, permanent: bool = False, needs_auth: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.permanent = permanent or needs_auth
        self.needs_auth = needs_auth
        """Only the user can fix it, by signing in (OAuth): the status is ``needsAuth``."""


def flatten(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        out: list[BaseException] = []
        for inner in exc.exceptions:
            out.extend(flatten(inner))
        return out
    return [exc]


def only_cancelled(exc: BaseException) -> bool:
    return all(isinstance(e, anyio.get_cancelled_exc_class()) for e in flatten(exc))


def with_stderr(message: str, transport: StdioTransport | None) -> str:
    """``message`` with the server's last stderr lines and, for a sandboxed server that the sandbox
    stopped, what was denied and the setting that allows it (as a Python tool's error has it)."""
    if transport is None:
        return message
    hint = transport.sandbox_hint()
    if hint is not None:
        message = f"{message}. {hint}"
    if transport.stderr_tail:
        return f"{message}. Last lines of its stderr:\n{transport.stderr_text()}"
    return message


def garbage_note(transport: StdioTransport | None) -> str:
    if transport is None or not transport.garbage:
        return ""
    return (f"; it wrote something other than JSON-RPC to stdout (is this an MCP stdio server?): "
            f"{clean(repr(transport.garbage[0]))}")


async def handshake_failure(config: ServerConfig, conn: Conn, exc: BaseException | None,
                            gave_garbage: bool = False) -> str:
    transport = conn.transport
    if transport is not None and (conn.lost.is_set() or transport.returncode is not None):
        code = await transport.wait_exited(1.0)
        what = transport.memory_killed() or (exit_reason(code) if code is not None else "closed its stdout")
        message = f"the server {what} before completing the MCP handshake{garbage_note(transport)}"
        return with_stderr(message, transport)
    if exc is None:
        if gave_garbage and transport is not None:
            message = f"the server did not complete the MCP handshake{garbage_note(transport)}"
        else:
            message = (f"no answer to the MCP handshake within {config.connect_timeout:g} s"
                       f"{garbage_note(transport)}")
        return with_stderr(message, transport)
    if conn.lost.is_set() and conn.notes:
        return f"the connection was lost during the MCP handshake: {conn.notes[-1]}"
    return with_stderr(describe(config, None, exc), transport)


async def lost_message(conn: Conn, url: str) -> str:
    transport = conn.transport
    if transport is not None:
        code = await transport.wait_exited(1.0)
        what = transport.memory_killed() or (exit_reason(code) if code is not None else "closed its stdout")
        return with_stderr(f"the server {what}", transport)
    message = f"the connection to {mask_url(url)} was closed"
    return f"{message}: {conn.notes[-1]}" if conn.notes else message


def describe(config: ServerConfig, url: str | None, exc: BaseException) -> str:
    """Words for an exception out of a transport or the SDK."""
    import httpx2  # httpx: loaded with the SDK, on first connect
    from mcp.shared.exceptions import MCPError  # mcp SDK

    from . import remote  # mcp SDK and httpx

    masked = mask_url(url) if url else mask_url(config.url or "")
    leaves = [e for e in flatten(exc) if not isinstance(e, anyio.get_cancelled_exc_class())] or [exc]
    for e in leaves:
        if isinstance(e, remote.TransportLost):
            return str(e)
        if isinstance(e, httpx2.ConnectTimeout):
            return f"cannot connect to {masked}: timed out"
        if isinstance(e, httpx2.ConnectError):
            return f"cannot connect to {masked}: nothing is listening there or the connection was refused"
        if isinstance(e, httpx2.HTTPStatusError):
            return f"HTTP {e.response.status_code} from {masked}"
        if isinstance(e, httpx2.HTTPError):
            return f"HTTP request to {masked} failed: {type(e).__name__}"
        if isinstance(e, MCPError):
            return f"the server answered the MCP handshake with an error: {clean(e.error.message)}"
        if isinstance(e, TimeoutError):
            return f"no answer within {config.connect_timeout:g} s"
    e = leaves[0]
    # never the token-bearing URL
    return clean(scrub(f"{type(e).__name__}: {e}", [url or "", config.url or ""], mask_url))


def not_connected(server_id: str, status: str, error: str | None) -> str:
    why = {"disabled": "it is disabled", "connecting": "it is still connecting",
           "installing": "its package runner is still installing it (mcpServers/status shows how far)",
           "needsAuth": "it needs you to sign in (mcpServers/login)"}.get(status)
    if why is None:
        why = f"it failed: {error}" if error else "it is not connected"
    return f"MCP server {server_id} is not connected: {why}"

"""Supervision: keep one server connected, retrying failures with backoff, until it is stopped."""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable

import anyio

from .failures import Failure
from .state import Conn, LiveServer

log = logging.getLogger("sidecar.mcp_host")

BACKOFF_START = 0.5
BACKOFF_MAX = 30.0
STABLE_AFTER = 60.0
"""A connection that lasted this long resets the reconnect backoff."""

Attempt = Callable[[LiveServer, Conn], Awaitable[None]]


async def supervise(srv: LiveServer, attempt: Attempt) -> None:
    """Run connection attempts for `srv` until its scope is cancelled; sets `srv.done` at the end."""
    try:
        with srv.scope:
            if srv.previous is not None:
                await srv.previous.done.wait()  # one instance of a server at a time
                srv.previous = None
            await _loop(srv, attempt)
    except Exception:
        log.exception("MCP server %s: supervisor failed", srv.label)
    finally:
        srv.conn = None
        srv.done.set()
        srv.changed()


async def _loop(srv: LiveServer, attempt: Attempt) -> None:
    delay = BACKOFF_START
    announce = True
    last_error: str | None = None
    quick_retry = True  # the first drop of a working connection retries at once
    while True:
        if announce:
            await srv.set_status("connecting")
        srv.force = False
        srv.wake = anyio.Event()
        conn = Conn()
        started = anyio.current_time()
        try:
            await attempt(srv, conn)
            failure = Failure("the connection ended")
        except Failure as exc:
            failure = exc
        except Exception as exc:  # a bug of ours or the SDK's: never into the sidecar's group
            log.exception("MCP server %s: unexpected failure", srv.label)
            failure = Failure(f"internal error: {exc!r}")
        finally:
            srv.conn = None
            srv.changed()
        if conn.connected and anyio.current_time() - started >= STABLE_AFTER:
            delay, quick_retry = BACKOFF_START, True
        if srv.force:  # reconnect() asked for a fresh attempt
            delay, announce = BACKOFF_START, True
            continue
        if conn.connected and quick_retry and not failure.permanent:
            # A crash of a server that worked: restart it now (callers wait for it),
            # and back off only if it keeps dropping.
            message = f"disconnected: {failure.message}"
            log.warning("MCP server %s: %s; reconnecting", srv.label, message)
            await srv.set_status("connecting", message)  # the UI still learns why
            quick_retry, announce = False, False
            continue
        if failure.needs_auth:
            log.info("MCP server %s needs a sign-in: %s", srv.label, failure.message)
            last_error = failure.message
            await srv.set_status("needsAuth", failure.message)
            await srv.wake.wait()  # mcpServers/login (or a change of the server) wakes it
            delay, announce = BACKOFF_START, True
            continue
        message = f"disconnected: {failure.message}" if conn.connected else failure.message
        if message != last_error:
            log.warning("MCP server %s: %s", srv.label, message)
        else:
            log.debug("MCP server %s: %s (again)", srv.label, message)
        last_error = message
        await srv.set_status("error", message)
        with anyio.move_on_after(math.inf if failure.permanent else delay):
            await srv.wake.wait()
        if srv.force:
            delay, announce = BACKOFF_START, True
        else:
            delay, announce = min(delay * 2, BACKOFF_MAX), False

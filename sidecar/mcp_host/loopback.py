"""The loopback redirect listener of an OAuth sign-in (RFC 8252 §7.3): 127.0.0.1, one callback.

The browser ends the sign-in at ``http://127.0.0.1:<port>/callback?code=...&state=...``. The
listener answers exactly one request on that path, and only one whose ``state`` is the one the
sign-in sent; anything else on that path (a wrong or missing ``state``) fails the sign-in at once
rather than waiting for a callback that will never come, and other paths (a browser's favicon
request) get a 404 and change nothing. It binds 127.0.0.1 only, never a name that could resolve to
another interface, and an ephemeral port unless the caller asks for the port its client
registration names (a registration holds its redirect URIs exactly).

Plain anyio TCP and a minimal HTTP/1.1 reading: cheap to import, nothing but the one GET to parse.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

import anyio
from anyio.abc import SocketStream, TaskGroup

log = logging.getLogger("sidecar.mcp_host")

CALLBACK_PATH = "/callback"
MAX_REQUEST = 16 * 1024  # bytes of request line and headers: a callback URL is a few hundred
READ_TIMEOUT = 10.0  # seconds a connected browser may take to send its request

_DONE_PAGE = ("<!doctype html><meta charset=utf-8><title>Signed in</title>"
              "<p>Signed in. You can close this tab and return to the app.</p>")
_FAILED_PAGE = ("<!doctype html><meta charset=utf-8><title>Sign-in failed</title>"
                "<p>This sign-in did not succeed: {reason}. Return to the app and try again.</p>")


@dataclass(frozen=True)
class Callback:
    """What the authorization server sent back through the browser."""

    code: str | None
    state: str | None
    iss: str | None
    error: str | None = None
    error_description: str | None = None


class CallbackRefused(Exception):
    """The callback cannot belong to this sign-in; `str()` says why, for the user."""


class Listener:
    """One sign-in's redirect endpoint. Use `listen()`; `expect(state)` before opening the browser."""

    def __init__(self, port: int) -> None:
        self.port = port
        self._state: str | None = None
        self._result: Callback | CallbackRefused | None = None
        self._done = anyio.Event()

    @property
    def redirect_uri(self) -> str:
        return f"http://127.0.0.1:{self.port}{CALLBACK_PATH}"

    def expect(self, state: str) -> None:
        self._state = state

    async def wait(self) -> Callback:
        """The one accepted callback; raises `CallbackRefused` for one that cannot be ours."""
        await self._done.wait()
        assert self._result is not None
        if isinstance(self._result, CallbackRefused):
            raise self._result
        return self._result

    async def serve_connection(self, stream: SocketStream) -> None:
        async with stream:
            try:
                with anyio.fail_after(READ_TIMEOUT):
                    head = await _read_head(stream)
            except (TimeoutError, anyio.EndOfStream, anyio.BrokenResourceError, ValueError):
                return
            status, page = self._answer(head)
            body = page.encode()
            try:
                await stream.send(
                    f"HTTP/1.1 {status}\r\nContent-Type: text/html; charset=utf-8\r\n"
                    f"Content-Length: {len(body)}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n".encode()
                    + body)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                pass

    def _answer(self, head: str) -> tuple[str, str]:
        method, _, rest = head.partition(" ")
        target = rest.split(" ", 1)[0]
        parts = urlsplit(target)
        if method != "GET" or parts.path != CALLBACK_PATH:
            return "404 Not Found", "<!doctype html><title>Not found</title>"
        if self._done.is_set():
            return "409 Conflict", _FAILED_PAGE.format(reason="this sign-in has already ended")
        query = {k: v[0] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        got = query.get("state")
        if self._state is None or got is None or not secrets.compare_digest(got, self._state):
            self._finish(CallbackRefused(
                "the authorization server redirected back with a state that does not match this sign-in "
                "(a stale or forged redirect); nothing was stored"))
            return "400 Bad Request", _FAILED_PAGE.format(reason="the answer does not match this sign-in")
        callback = Callback(code=query.get("code"), state=got, iss=query.get("iss"), error=query.get("error"),
                            error_description=query.get("error_description"))
        self._finish(callback)
        if callback.error:
            return "200 OK", _FAILED_PAGE.format(reason="the authorization server refused it")
        return "200 OK", _DONE_PAGE

    def _finish(self, result: Callback | CallbackRefused) -> None:
        self._result = result
        self._done.set()


async def _read_head(stream: SocketStream) -> str:
    data = b""
    while b"\r\n\r\n" not in data and b"\n\n" not in data:
        chunk = await stream.receive(4096)
        data += chunk
        if len(data) > MAX_REQUEST:
            raise ValueError("request too large")
    return data.split(b"\r\n", 1)[0].split(b"\n", 1)[0].decode("latin-1")


@asynccontextmanager
async def listen(port: int = 0) -> AsyncIterator[Listener]:
    """Listen on 127.0.0.1 (`port`, else an ephemeral one when it is taken) until the block ends."""
    try:
        server = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=port)
    except OSError:
        if port == 0:
            raise
        log.debug("port %d is taken; the sign-in listens on another one", port)
        server = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    async with server:
        bound = server.extra(anyio.abc.SocketAttribute.local_port)
        listener = Listener(bound)
        async with anyio.create_task_group() as tg:
            tg.start_soon(_accept, server, listener, tg)
            try:
                yield listener
            finally:
                tg.cancel_scope.cancel()


async def _accept(server: anyio.abc.Listener[SocketStream], listener: Listener, tg: TaskGroup) -> None:
    await server.serve(listener.serve_connection, task_group=tg)

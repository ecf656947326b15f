"""The httpx2 transport that pins each connection to the addresses a guard checked.

httpx2 hands a request to its transport, whose httpcore2 pool opens connections through a network
backend's ``connect_tcp(host, port)``; httpcore2's own backend resolves ``host`` itself. Here the
transport asks the guard to check each request's URL before the pool sees it (so a request on a
pooled connection and every redirect hop are checked too), and the backend asks the guard for the
checked addresses and connects to those IP literals, while httpcore2 keeps the URL's name for the
Host header and for TLS (``server_hostname``: SNI and the certificate check).

A guard is anything with ``check_url`` and ``addresses`` (`Guard`): the HTTP tools' allowedHosts
(tools/providers/http/guard.py) and an OAuth flow's destinations (mcp_host/oauth_guard.py). What
they raise goes to the caller as it is. Import lazily: it loads httpx2.
"""

from __future__ import annotations

import functools
import logging
import ssl
from collections.abc import Iterable
from typing import Any, Protocol

import anyio
import httpcore2
import httpx2
from httpcore2._backends.anyio import AnyIOBackend  # the package root re-exports it behind a try


class Guard(Protocol):
    def check_url(self, url: httpx2.URL) -> None:
        """Refuse a request before any connection (no DNS): its scheme, its host by name."""

    async def addresses(self, host: str, port: int) -> list[str]:
        """The addresses to connect to for ``host:port``, each one checked; at least one, or raise
        (OSError when the name does not resolve)."""
        ...


class PinnedBackend(AnyIOBackend):
    """Connects only to addresses the guard resolved and checked, never by a lookup of its own."""

    def __init__(self, guard: Guard, log: logging.Logger) -> None:
        self._guard = guard
        self._log = log

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None,  # noqa: ASYNC109 -- httpcore2's interface
                          local_address: str | None = None,
                          socket_options: Iterable[httpcore2.SOCKET_OPTION] | None = None,
                          ) -> httpcore2.AsyncNetworkStream:
        # One deadline for the lookup and every connection attempt: the connect timeout is the
        # caller's bound on the whole step.
        deadline = None if timeout is None else anyio.current_time() + timeout
        try:
            with anyio.fail_after(timeout):
                addresses = await self._guard.addresses(host, port)
        except TimeoutError:
            raise httpcore2.ConnectTimeout(f"looking up {host} took longer than {timeout} s") from None
        except OSError as exc:
            raise httpcore2.ConnectError(f"cannot resolve {host}: {exc}") from exc
        failure: Exception | None = None
        for address in addresses:
            left = None if deadline is None else deadline - anyio.current_time()
            if left is not None and left <= 0:
                raise httpcore2.ConnectTimeout(f"connecting to {host} took longer than {timeout} s")
            self._log.debug("http: connecting to %s port %d at %s", host, port, address)
            try:
                return await super().connect_tcp(address, port, left, local_address, socket_options)
            except (httpcore2.ConnectError, httpcore2.ConnectTimeout) as exc:
                failure = exc
        assert failure is not None  # addresses() returns at least one or raises
        raise failure

    async def connect_unix_socket(self, path: str, timeout: float | None = None,  # noqa: ASYNC109 -- httpcore2's interface
                                  socket_options: Iterable[httpcore2.SOCKET_OPTION] | None = None,
                                  ) -> httpcore2.AsyncNetworkStream:
        raise httpcore2.ConnectError("a pinned connection never goes to a Unix socket")


@functools.cache
def _default_ssl_context(http1: bool, http2: bool, trust_env: bool) -> ssl.SSLContext:
    """One verifying context per protocol choice, shared by every transport: building one loads the
    CA bundle (about 50 ms), and httpcore2 sets ALPN on it from http1/http2 at each connect, so
    transports that share one must agree on those."""
    return httpx2.create_ssl_context(trust_env=trust_env)


class PinnedTransport(httpx2.AsyncHTTPTransport):
    def __init__(self, guard: Guard, log: logging.Logger, *, verify: ssl.SSLContext | str | bool = True,
                 cert: Any = None, trust_env: bool = True, http1: bool = True, http2: bool = False,
                 limits: httpx2.Limits | None = None, local_address: str | None = None, retries: int = 0,
                 socket_options: Iterable[httpcore2.SOCKET_OPTION] | None = None) -> None:
        # Not super().__init__(): it builds a pool on httpcore2's own backend (which resolves names
        # itself) and accepts a proxy or a Unix socket; this pool differs only by its backend.
        limits = limits or httpx2.Limits(max_connections=100, max_keepalive_connections=20)
        self._guard = guard
        self._pool = httpcore2.AsyncConnectionPool(
            ssl_context=(_default_ssl_context(http1, http2, trust_env) if (verify, cert) == (True, None)
                         else httpx2.create_ssl_context(verify=verify, cert=cert, trust_env=trust_env)),
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            http1=http1, http2=http2, local_address=local_address, retries=retries,
            socket_options=socket_options, network_backend=PinnedBackend(guard, log))

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        self._guard.check_url(request.url)
        return await super().handle_async_request(request)

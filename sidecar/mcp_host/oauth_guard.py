"""Where an OAuth sign-in may send codes, tokens and its own requests.

- Codes and tokens go over HTTPS, or plain HTTP to this machine only (`check_endpoint`).
- The flow's own requests (metadata, registration, token, revocation) are steered by the server and
  the metadata it publishes: `Destinations` refuses addresses that are not public (loopback,
  private, link-local, cloud metadata; sidecar/net/addresses.py) unless it is the server's own host
  or the server itself is on such an address (a local setup). Its `transport()` resolves each host
  once per connection, checks every address and connects to those (sidecar/net/pinned.py), so a DNS
  answer that changes between the check and the connect (rebinding) changes nothing.

Import lazily, with `oauth.py`: it raises the SDK's `OAuthFlowError`, which the sign-in words, and
loads httpx2.
"""

from __future__ import annotations

import logging
from urllib.parse import urlsplit

import httpx2
from mcp.client.auth import OAuthFlowError

from ..net.addresses import classify
from ..net.lookup import Resolver, host_name, is_loopback_name, lookup, resolve_system, resolved_as
from ..net.pinned import PinnedTransport
from ..secrets import mask_url

log = logging.getLogger("sidecar.mcp_host.oauth")

def is_loopback(url: str) -> bool:
    return is_loopback_name(urlsplit(url).hostname)


def check_endpoint(what: str, url: str | None) -> None:
    """An OAuth endpoint carries codes and tokens: HTTPS, or plain HTTP on this machine only."""
    if url is None:
        return
    scheme = urlsplit(url).scheme.lower()
    if scheme == "https" or (scheme == "http" and is_loopback(url)):
        return
    raise OAuthFlowError(f"the {what} endpoint {mask_url(url)} is not HTTPS; "
                         "codes and tokens are only sent over HTTPS (or to this machine)")


class Destinations:
    """Where the flow's own requests (metadata, registration, token, revocation) may go.

    The server and the metadata it publishes steer them, so an address that is not public
    (loopback, private, link-local, cloud metadata) is refused, unless it is the server's own host
    or the server itself is on such an address (the user set up a local server, its authorization
    server is local too). The pinned `transport()` applies this to every connection it opens.
    """

    def __init__(self, server_url: str, *, resolver: Resolver | None = None) -> None:
        parts = urlsplit(server_url)
        self.server_host = host_name(parts.hostname or "")
        self._server_port = parts.port or (80 if parts.scheme == "http" else 443)
        self._resolver = resolver or resolve_system
        self._server_local: bool | None = None

    def check_url(self, url: httpx2.URL) -> None:
        if url.scheme not in ("http", "https"):
            raise OAuthFlowError(f"the OAuth request to {mask_url(str(url))} was refused: "
                                 "only http and https are used")

    async def addresses(self, host: str, port: int) -> list[str]:
        """The addresses to connect to for ``host:port``, resolved once and each one checked.

        Raises OAuthFlowError for an address the server may not steer us to, OSError when the
        name does not resolve.
        """
        found = await lookup(self._resolver, host, port)
        if host_name(host) != self.server_host and not await self._server_is_local():
            for address in found:
                verdict = classify(address)
                if verdict is not None:
                    raise OAuthFlowError(f"the OAuth request to {host_name(host)} was refused: "
                                         f"{resolved_as(host, address, verdict)}, "
                                         "and the server is not on this machine or network")
        return [str(a) for a in found]

    def transport(self) -> httpx2.AsyncBaseTransport:
        """An httpx2 transport that checks and pins every connection it opens (give the client no proxy)."""
        return PinnedTransport(self, log)

    async def _server_is_local(self) -> bool:
        if self._server_local is None:
            try:
                found = await lookup(self._resolver, self.server_host, self._server_port)
            except OSError:
                found = []  # the server's own requests fail with their own words; here it counts as public
            self._server_local = any(classify(a) is not None for a in found)
        return self._server_local

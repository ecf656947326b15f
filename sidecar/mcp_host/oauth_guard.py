"""Where an OAuth sign-in may send codes, tokens and its own requests.

- Codes and tokens go over HTTPS, or plain HTTP to this machine only (`check_endpoint`).
- The flow's own requests (metadata, registration, token) are steered by the server and the
  metadata it publishes: `Destinations` refuses addresses that are not public (loopback, private,
  link-local, cloud metadata; the HTTP tools' table) unless it is the server's own host or the
  server itself is on such an address (a local setup). Checked before each request; the
  connection is not pinned to the checked address.

Import lazily, with `oauth.py`: it raises the SDK's `OAuthFlowError`, which the sign-in words.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

import anyio
from mcp.client.auth import OAuthFlowError

from ..secrets import mask_url
from ..net.addresses import IPAddress, classify

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")


def is_loopback(url: str) -> bool:
    return (urlsplit(url).hostname or "") in LOOPBACK_HOSTS


def check_endpoint(what: str, url: str | None) -> None:
    """An OAuth endpoint carries codes and tokens: HTTPS, or plain HTTP on this machine only."""
    if url is None:
        return
    scheme = urlsplit(url).scheme.lower()
    if scheme == "https" or (scheme == "http" and is_loopback(url)):
        return
    raise OAuthFlowError(f"the {what} endpoint {mask_url(url)} is not HTTPS; "
                         "codes and tokens are only sent over HTTPS (or to this machine)")


async def _addresses(host: str) -> list[IPAddress]:
    try:
        return [ipaddress.ip_address(host.strip("[]"))]
    except ValueError:
        pass
    try:
        infos = await anyio.getaddrinfo(host, None)
    except OSError:
        return []  # the request itself will fail, with its own words
    return [ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos]


class Destinations:
    """Where the flow's own requests (metadata, registration, token) may go.

    The server and the metadata it publishes steer them, so an address that is not public
    (loopback, private, link-local, cloud metadata) is refused, unless it is the server's own host
    or the server itself is on such an address (the user set up a local server, its authorization
    server is local too).
    """

    def __init__(self, server_url: str) -> None:
        self.server_host = (urlsplit(server_url).hostname or "").lower()
        self._server_local: bool | None = None

    async def check(self, url: str) -> None:
        host = (urlsplit(url).hostname or "").lower()
        if host == self.server_host:
            return
        if self._server_local is None:
            self._server_local = any(classify(a) is not None for a in await _addresses(self.server_host))
        if self._server_local:
            return
        for address in await _addresses(host):
            verdict = classify(address)
            if verdict is not None:
                raise OAuthFlowError(f"the OAuth request to {host} was refused: it is {verdict.describe()}, "
                                     "and the server is not on this machine or network")

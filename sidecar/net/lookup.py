"""How a guard resolves a host name: once per connection, through a resolver tests can replace."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Awaitable, Callable, Sequence
from urllib.parse import unquote

import anyio

from .addresses import IPAddress, Verdict

Resolver = Callable[[str, int], Awaitable[Sequence[str]]]
"""``(name, port) -> addresses`` as strings; tests inject one (resolving a public name needs the
internet). A guard calls it at most once per connection its transport opens."""


async def resolve_system(host: str, port: int) -> list[str]:
    """The system resolver (getaddrinfo in a worker thread)."""
    infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


def literal(host: str) -> IPAddress | None:
    """The address a URL host or entry spells as an IP literal (``::1``, ``fe80::1%25eth0``)."""
    try:
        return ipaddress.ip_address(unquote(host.strip("[]")))
    except ValueError:
        return None


async def lookup(resolver: Resolver, host: str, port: int) -> list[IPAddress]:
    """The distinct addresses ``host`` names: itself when it is a literal, else what ``resolver``
    answers (entries that are not addresses dropped). A name with none is ``socket.gaierror``."""
    address = literal(host)
    if address is not None:
        return [address]
    answers = await resolver(host, port)
    found = list(dict.fromkeys(a for a in map(literal, answers) if a is not None))
    if not found:
        raise socket.gaierror(socket.EAI_NONAME, f"{host} has no address")
    return found


# The names of this machine a user may give for a server or a bundle on it.
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")


def host_name(host: str) -> str:
    """A URL's host as the guards compare it: no IPv6 brackets, no trailing dot, lower case."""
    return host.strip("[]").rstrip(".").lower()


def is_loopback_name(host: str | None) -> bool:
    return host_name(host or "") in LOOPBACK_NAMES


def resolved_as(host: str, address: IPAddress, verdict: Verdict) -> str:
    """How a refusal names the address it refused: "it is <kind>" for a literal host, "it resolved
    to <address>, <kind>" for a name."""
    if literal(host) is not None:
        return f"it is {verdict.describe()}"
    return f"it resolved to {address}, {verdict.describe()}"

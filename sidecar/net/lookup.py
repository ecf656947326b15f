"""How a guard resolves a host name: once per connection, through a resolver tests can replace."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Awaitable, Callable, Sequence
from urllib.parse import unquote

import anyio

from .addresses import IPAddress

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
    answers (entries that are not addresses dropped)."""
    address = literal(host)
    if address is not None:
        return [address]
    answers = await resolver(host, port)
    return list(dict.fromkeys(a for a in map(literal, answers) if a is not None))

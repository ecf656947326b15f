"""Where an HTTP tool's request may go: ``Destinations`` (one per tool, from its ``allowedHosts`` and
its toolset's), enforced on every request, redirects included, by the pinned transport of
sidecar/net/pinned.py.

The rules, in the order they are applied to each request:

1. The URL's host must match an ``allowedHosts`` entry, before any DNS lookup (a name outside the
   list is never resolved). An entry is
   - a name, ``api.example.com``: compared case-insensitively after IDNA encoding, a trailing dot
     ignored on both sides; ``Bücher.example`` and ``xn--bcher-kva.example`` are the same entry;
   - a wildcard, ``*.example.com``: any name below ``example.com`` (``a.example.com``,
     ``a.b.example.com``), never ``example.com`` itself; at least two labels after ``*.``;
   - an IP address, ``203.0.113.7`` or ``[2001:db8::7]`` (bare ``2001:db8::7`` too): a URL whose
     host is an IP literal must be listed as that address (or inside a listed network); a name
     that resolves to it is not enough;
   - a network, ``10.0.0.0/8`` or ``fd00::/8``: IP literals and resolved addresses inside it;
   - any of the first three with ``:port`` (``api.example.com:8443``, ``[::1]:8080``): only that
     port; without a port, any port.
2. The name is resolved once (getaddrinfo in a worker thread) and EVERY address it gives is
   classified (sidecar/net/addresses.py). If any is loopback, private, shared (CGNAT), link-local, cloud
   metadata, unspecified, multicast or reserved, or an IPv4-mapped, IPv4-compatible, 6to4, NAT64 or
   Teredo form of one, the request is refused, unless allowedHosts lists that address: its literal
   (with a matching port, if the entry has one), or a network that contains it. Metadata addresses
   (169.254.169.254, fd00:ec2::254, 100.100.100.200, ...) are allowed only by their literal, never
   by a network. Listing is the one explicit rule; there is no separate "allow private" switch.
3. The connection is opened to the checked addresses, in the resolver's order (the next one only if
   connecting to the previous fails), never by a second lookup, so a DNS answer that changes
   between check and use (rebinding) changes nothing. The Host header and TLS (SNI, certificate
   check) keep the URL's name.
4. A redirect is a new request through the same transport: all of the above again. Whether the
   client follows redirects is the runner's choice; with this transport both are safe.

A refusal is ``DestinationRefused`` (PermissionDenied): the message names the host, the port, the
address it resolved to (or that it was not looked up) and the entry to add to allowedHosts.
"""

from __future__ import annotations

import ipaddress
import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from ....errors import DestinationRefused, InvalidParams
from ....net.addresses import IPAddress, Verdict, classify
from ....net.lookup import Resolver, lookup, resolve_system
from ....net.lookup import literal as _literal

if TYPE_CHECKING:
    import httpx2

log = logging.getLogger("sidecar.tools.http")

Network = ipaddress.IPv4Network | ipaddress.IPv6Network

_LABEL = re.compile(r"(?!-)[a-z0-9_-]{1,63}(?<!-)")
_DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True, slots=True)
class HostRule:
    """One allowedHosts entry, parsed. ``name`` is the normalised name, or for a wildcard the
    suffix its names end with (``.example.com``)."""

    entry: str
    kind: Literal["name", "wildcard", "address", "network"]
    name: str = ""
    address: IPAddress | None = None
    network: Network | None = None
    port: int | None = None

    def admits_host(self, name: str | None, literal: IPAddress | None, port: int) -> bool:
        if self.port is not None and self.port != port:
            return False
        if literal is not None:
            return (self.kind == "address" and self.address == literal) or (
                self.kind == "network" and self.network is not None and _in(literal, self.network))
        if self.kind == "name":
            return name == self.name
        return self.kind == "wildcard" and name is not None and name.endswith(self.name)

    def admits_address(self, address: IPAddress, verdict: Verdict, port: int) -> bool:
        if self.port is not None and self.port != port:
            return False
        if self.kind == "address":
            return self.address == address
        return (self.kind == "network" and verdict.kind != "metadata" and self.network is not None
                and _in(address, self.network))


def parse_host_entry(entry: str) -> HostRule | str:
    """The rule an allowedHosts entry stands for, or what is wrong with it (for the manifest's error)."""
    text = entry.strip()
    if not text:
        return "an empty host; write a host name like api.example.com"
    if "://" in text or any(c in text for c in "@?# \\"):
        return f"{entry!r} is not a host name: write the host alone, like api.example.com (no scheme, path or user)"
    if "/" in text:
        return _parse_network(entry, text)
    split = _host_and_port(entry, text)
    if isinstance(split, str):
        return split
    host, port_number = split
    literal = _literal(host)
    if literal is not None:
        return HostRule(entry, "address", address=literal, port=port_number)
    if ":" in host:
        return f"{entry!r} is not a valid IPv6 address"
    wildcard = host.startswith("*.")
    if "*" in host[2 if wildcard else 0:]:
        return f"{entry!r}: '*' is only allowed as the first label (*.example.com)"
    name = _normalize_name(host[2:] if wildcard else host)
    if name is None:
        return f"{entry!r} is not a valid host name (letters, digits, '-' and '_' in dot-separated labels)"
    if wildcard:
        if name.count(".") < 1:
            return f"{entry!r} is too broad: a wildcard needs at least two labels after '*.' (*.example.com)"
        return HostRule(entry, "wildcard", name="." + name, port=port_number)
    return HostRule(entry, "name", name=name, port=port_number)


def _host_and_port(entry: str, text: str) -> tuple[str, int | None] | str:
    """``host``, ``host:port``, ``[v6]`` or ``[v6]:port`` split, or what is wrong with it."""
    host, port = text, None
    if text.startswith("["):
        close = text.find("]")
        rest = text[close + 1:] if close > 0 else "?"
        if close < 0 or (rest and not rest.startswith(":")):
            return f"{entry!r}: an IPv6 address is written [2001:db8::1] or [2001:db8::1]:8080"
        host, port = text[1:close], rest[1:] if rest else None
    elif text.count(":") == 1:
        host, port = text.split(":")
    if port is None:
        return host, None
    if not port.isdigit() or not 0 < int(port) < 65536:
        return f"{entry!r}: the port must be a number from 1 to 65535"
    return host, int(port)


def _parse_network(entry: str, text: str) -> HostRule | str:
    try:
        network = ipaddress.ip_network(text, strict=True)
    except ValueError as exc:
        if "has host bits set" in str(exc):
            loose = ipaddress.ip_network(text, strict=False)
            return f"{entry!r} has bits set outside its prefix: did you mean {loose}?"
        return f"{entry!r} is not a host or a network (a network is written like 10.0.0.0/8 or fd00::/8)"
    return HostRule(entry, "network", network=network)


class Destinations:
    """The hosts and addresses one HTTP tool may reach (see the module's docstring for the rules).

    ``where`` names the setting in messages (``"allowedHosts"`` by default; the runner may say
    ``"tools[0].http.allowedHosts"``). Bad entries raise InvalidParams naming ``where[i]``; a
    manifest reader should check them first with ``parse_host_entry``.
    """

    def __init__(self, allowed_hosts: Iterable[str], *, where: str = "allowedHosts",
                 resolver: Resolver | None = None) -> None:
        rules: list[HostRule] = []
        for i, entry in enumerate(allowed_hosts):
            rule = parse_host_entry(entry)
            if isinstance(rule, str):
                raise InvalidParams(f"{where}[{i}]", rule)
            rules.append(rule)
        self.rules = tuple(rules)
        self.where = where
        self._resolver = resolver or resolve_system

    def check_url(self, url: httpx2.URL) -> None:
        """The name check for one request (no DNS): its scheme and host:port must be allowed."""
        if url.scheme not in _DEFAULT_PORTS:
            raise DestinationRefused(
                f"refused {url.scheme}:// URL to {url.host!r}: HTTP tools only make http and https requests",
                host=url.host, port=None, address=None, reason="scheme", allow=None)
        self.check_host(url.raw_host.decode("ascii"), url.port or _DEFAULT_PORTS[url.scheme])

    def check_host(self, host: str, port: int) -> IPAddress | None:
        """Refuse ``host`` unless an entry admits it; return its address when it is an IP literal."""
        literal = _literal(host)
        name = None if literal is not None else (_normalize_name(host) or host.lower())
        if any(rule.admits_host(name, literal, port) for rule in self.rules):
            return literal
        shown = _show(literal) if literal is not None else name or host
        listed = ", ".join(rule.entry for rule in self.rules) or "nothing"
        same_host = [r.entry for r in self.rules if r.port is not None and r.admits_host(name, literal, r.port)]
        if same_host:
            why = f"port {port} of {shown} is not allowed ({self.where} has {', '.join(same_host)})"
        elif literal is not None:
            why = (f"the address {shown} is not in {self.where} ({listed}); "
                   "an IP address in a URL must be listed as itself")
        else:
            why = f"host {shown!r} is not in {self.where} ({listed}); it was not looked up"
        allow = _entry_for(shown, port if same_host else None, literal)
        raise DestinationRefused(f"refused {_netloc(shown, port, literal)}: {why}; to allow it, add "
                                 f"{allow!r} to {self.where}", host=shown, port=port,
                                 address=shown if literal is not None else None,
                                 reason="notAllowed", allow=allow)

    async def addresses(self, host: str, port: int) -> list[str]:
        """The addresses to connect to for ``host:port``, each one checked; resolves a name once.

        Raises DestinationRefused, or OSError when the name does not resolve.
        """
        self.check_host(host, port)
        found = await lookup(self._resolver, host, port)
        for address in found:
            verdict = classify(address)
            if verdict is not None and not any(r.admits_address(address, verdict, port) for r in self.rules):
                raise self._refused_address(host, port, address, verdict, len(found))
        return [str(a) for a in found]

    def _refused_address(self, host: str, port: int, address: IPAddress, verdict: Verdict,
                         count: int) -> DestinationRefused:
        shown = _show(address)
        allow = _entry_for(shown, None, address)
        literal = _literal(host)
        if literal is not None:
            what = f"{shown} is {verdict.describe()}"
        else:
            among = "" if count == 1 else f" {count} addresses, among them"
            what = f"{host} resolved to{among} {shown}, {verdict.describe()}"
        extra = " (a network entry does not cover a metadata address)" if verdict.kind == "metadata" else ""
        return DestinationRefused(
            f"refused {_netloc(host, port, literal)}: {what}; to allow that address, add {allow!r} to "
            f"{self.where}{extra}", host=host, port=port, address=shown, reason=verdict.kind, allow=allow)

    def transport(self, **kwargs: Any) -> httpx2.AsyncBaseTransport:
        """An httpx2 transport that applies these rules to every request it sends. ``kwargs`` are
        httpx2.AsyncHTTPTransport's (verify, cert, http1, http2, limits, retries, ...), except
        ``proxy`` and ``uds``, which would connect somewhere else. Give it to the client as
        ``transport=`` and give the client no ``mounts``/``proxy`` (with a transport, httpx2 ignores
        the proxy environment variables)."""
        from ....net.pinned import PinnedTransport  # imports httpx2 (heavy): only once a tool makes a request

        return PinnedTransport(self, log, **kwargs)


def _show(address: IPAddress) -> str:
    """How a message writes an address: an IPv4-mapped one with its IPv4 part dotted, as people do."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return f"::ffff:{address.ipv4_mapped}"
    return str(address)


def _in(address: IPAddress, network: Network) -> bool:
    return address.version == network.version and address in network


def _normalize_name(name: str) -> str | None:
    """Lower case, IDNA (UTS 46) encoded, no trailing dot; None when it is no valid host name."""
    name = name.lower()
    name = name[:-1] if name.endswith(".") else name
    if not name.isascii():
        import idna  # httpx2's IDNA codec (heavy tables): only for a non-ASCII name

        try:
            name = idna.encode(name, uts46=True).decode("ascii")
        except idna.IDNAError:
            return None
    if len(name) > 253 or not all(_LABEL.fullmatch(label) for label in name.split(".")):
        return None
    return name


def _netloc(host: str, port: int, literal: IPAddress | None) -> str:
    return f"[{host}]:{port}" if literal is not None and literal.version == 6 else f"{host}:{port}"


def _entry_for(host: str, port: int | None, literal: IPAddress | None) -> str:
    """The allowedHosts entry that would admit ``host`` (on ``port`` only, when one is given)."""
    if port is None:
        return host
    return f"[{host}]:{port}" if literal is not None and literal.version == 6 else f"{host}:{port}"

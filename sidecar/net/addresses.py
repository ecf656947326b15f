"""Which IP addresses a request steered by someone else (an HTTP tool, an OAuth server's metadata)
may not reach on its own: loopback, private, shared (CGNAT), link-local, cloud metadata, unspecified,
multicast and reserved, in both families, and the IPv6 forms that carry an IPv4 address
(IPv4-mapped, IPv4-compatible, 6to4, NAT64, Teredo).

The tables are written out here instead of using ``ipaddress``'s ``is_private``/``is_global``: those
change between Python patch releases, and a refusal must say which range it hit.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Literal

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Kind = Literal["loopback", "private", "shared", "link-local", "metadata", "unspecified", "multicast", "reserved"]

# Cloud instance services a request from the user's machine (or a VM) must never reach by accident:
# AWS/GCP/Azure/OpenStack metadata, AWS ECS task metadata, AWS DNS and time, Tencent, Scaleway,
# Alibaba, Oracle, Azure's wireserver (a public address, reachable only from inside Azure), and the
# IPv6 endpoints of AWS (IMDS, DNS, time) and GCP.
METADATA: frozenset[IPAddress] = frozenset(ipaddress.ip_address(a) for a in (
    "169.254.169.254", "169.254.170.2", "169.254.169.253", "169.254.169.123", "169.254.0.23",
    "169.254.42.42", "100.100.100.200", "192.0.0.192", "168.63.129.16",
    "fd00:ec2::254", "fd00:ec2::23", "fd00:ec2::123", "fd20:ce::254",
))

_V4_RANGES: tuple[tuple[str, Kind], ...] = (
    ("0.0.0.0/8", "unspecified"),       # "this network": 0.0.0.0 reaches the local host on Linux
    ("10.0.0.0/8", "private"),
    ("100.64.0.0/10", "shared"),        # carrier-grade NAT (RFC 6598)
    ("127.0.0.0/8", "loopback"),
    ("169.254.0.0/16", "link-local"),
    ("172.16.0.0/12", "private"),
    ("192.0.0.0/24", "reserved"),       # IETF protocol assignments
    ("192.0.2.0/24", "reserved"),       # documentation
    ("192.88.99.0/24", "reserved"),     # 6to4 relay anycast (deprecated)
    ("192.168.0.0/16", "private"),
    ("198.18.0.0/15", "reserved"),      # benchmarking
    ("198.51.100.0/24", "reserved"),    # documentation
    ("203.0.113.0/24", "reserved"),     # documentation
    ("224.0.0.0/4", "multicast"),
    ("240.0.0.0/4", "reserved"),        # future use, and 255.255.255.255 broadcast
)

_V6_RANGES: tuple[tuple[str, Kind], ...] = (
    ("::/128", "unspecified"),
    ("::1/128", "loopback"),
    ("100::/64", "reserved"),           # discard-only
    ("2001:2::/48", "reserved"),        # benchmarking
    ("2001:10::/28", "reserved"),       # ORCHID (deprecated)
    ("2001:20::/28", "reserved"),       # ORCHIDv2
    ("2001:db8::/32", "reserved"),      # documentation
    ("3fff::/20", "reserved"),          # documentation (RFC 9637)
    ("5f00::/16", "reserved"),          # SRv6 SIDs
    ("64:ff9b:1::/48", "private"),      # local-use NAT64: the translator and what it reaches are local
    ("fc00::/7", "private"),            # unique local addresses
    ("fe80::/10", "link-local"),
    ("fec0::/10", "private"),           # site-local (deprecated)
    ("ff00::/8", "multicast"),
)
_V4: tuple[tuple[ipaddress.IPv4Network, Kind], ...] = tuple((ipaddress.IPv4Network(n), k) for n, k in _V4_RANGES)
_V6: tuple[tuple[ipaddress.IPv6Network, Kind], ...] = tuple((ipaddress.IPv6Network(n), k) for n, k in _V6_RANGES)
_GLOBAL_UNICAST = ipaddress.IPv6Network("2000::/3")
_MAPPED = ipaddress.IPv6Network("::ffff:0:0/96")
_COMPATIBLE = ipaddress.IPv6Network("::/96")
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_TEREDO = ipaddress.IPv6Network("2001::/32")
_SIX_TO_FOUR = ipaddress.IPv6Network("2002::/16")


@dataclass(frozen=True, slots=True)
class Verdict:
    """Why an address is not public: its class, the range it is in, and, for an IPv6 form that
    carries an IPv4 address, which form and which address (``"IPv4-mapped form of 127.0.0.1"``)."""

    kind: Kind
    network: str
    via: str | None = None

    def describe(self) -> str:
        name = {"shared": "shared (carrier-grade NAT)", "metadata": "cloud metadata"}.get(self.kind, self.kind)
        article = "an" if name[0] in "aeiou" else "a"
        notes = [n for n in (self.via, None if self.kind == "metadata" else self.network) if n]
        return f"{article} {name} address" + (f" ({', '.join(notes)})" if notes else "")


def classify(address: IPAddress) -> Verdict | None:
    """None for a public address; otherwise why it is refused unless explicitly allowed."""
    if isinstance(address, ipaddress.IPv6Address) and address.scope_id:
        address = ipaddress.IPv6Address(str(address).split("%", 1)[0])
    if address in METADATA:
        return Verdict("metadata", str(address))
    if isinstance(address, ipaddress.IPv4Address):
        for network, kind in _V4:
            if address in network:
                return Verdict(kind, str(network))
        return None
    embedded = _embedded_v4(address)
    if embedded is not None:
        form, v4 = embedded
        inner = classify(v4)
        if inner is not None:
            return Verdict(inner.kind, inner.network, f"{form} form of {v4}")
        if form == "IPv4-compatible":  # deprecated since RFC 4291 and never routed, whatever it carries
            return Verdict("reserved", str(_COMPATIBLE), f"{form} form of {v4}")
        return None
    for network, kind in _V6:
        if address in network:
            return Verdict(kind, str(network))
    if address not in _GLOBAL_UNICAST:
        return Verdict("reserved", "outside 2000::/3")
    return None


def _embedded_v4(address: ipaddress.IPv6Address) -> tuple[str, ipaddress.IPv4Address] | None:
    """The IPv4 address an IPv6 form carries, and the form's name; None for any other address."""
    if address in _MAPPED:
        return "IPv4-mapped", ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address in _COMPATIBLE and int(address) > 1:  # :: and ::1 are themselves, not IPv4 forms
        return "IPv4-compatible", ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address in _NAT64:
        return "NAT64", ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address in _SIX_TO_FOUR:
        return "6to4", ipaddress.IPv4Address((int(address) >> 80) & 0xFFFFFFFF)
    if address in _TEREDO:  # the client's address, stored inverted in the last 32 bits
        return "Teredo", ipaddress.IPv4Address(~int(address) & 0xFFFFFFFF)
    return None

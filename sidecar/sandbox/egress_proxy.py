"""One connection through a sandbox's filtering proxy: read the request head, decide, connect, relay.

A client inside the sandbox (through sidecar/sandbox/bridge.py) sends either ``CONNECT host:port``
(a tunnel: HTTPS, or anything else over TCP) or a plain-HTTP request in absolute form
(``GET http://host:port/path HTTP/1.1``). The proxy decides on the host before any DNS lookup, then
resolves it once and connects only to addresses it checked (sidecar/net, the rule HTTP tools follow):

1. ``host:port`` must match ``sandbox.allowedHosts`` (``policy.host_allowed``): else 403, and the
   name is never looked up.
2. Every address the name resolves to is classified (sidecar/net/addresses.py). A loopback,
   private, shared, link-local, metadata, multicast or reserved address is refused (403) unless
   that address is itself listed (``127.0.0.1:8080``), or the host is ``localhost`` listed as such
   and the address is loopback. A name listed for a public API that resolves to 10.0.0.5 is
   refused: a manifest that may reach a machine of the user's network must say so in plain sight.
3. The connection goes to the checked addresses in the resolver's order, never by a second lookup.

The answer to a refusal is a 403 whose reason phrase and body name the host and the setting that
allows it: urllib and httpx put the reason phrase in the exception a tool sees.
"""

from __future__ import annotations

import asyncio
import logging
import re
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import anyio
import anyio.abc

from ..net.addresses import IPAddress, classify
from ..net.lookup import Resolver, host_name, is_loopback_name, literal, lookup, resolved_as
from .policy import host_allowed

log = logging.getLogger("sidecar.sandbox.egress")

BLOCK = 64 * 1024
_HOST = re.compile(r"[a-z0-9._-]{1,253}|\[[0-9a-f:.]{2,45}\]")
_REQUEST_LINE = re.compile(rb"([A-Z]{3,16}) (\S{1,8192}) HTTP/1\.[01]")
_HOP_BY_HOP = frozenset({b"connection", b"proxy-connection", b"keep-alive", b"proxy-authorization",
                         b"proxy-authenticate", b"te", b"trailer", b"upgrade"})


@dataclass(frozen=True, slots=True)
class Limits:
    """Bounds on what one sandbox, and all of them together, may hold open in the sidecar."""

    connections_per_sandbox: int = 32
    connections: int = 256  # all sandboxes
    head_bytes: int = 16 * 1024  # a request head larger than this is refused (431)
    head_timeout: float = 10.0  # seconds to send the request head
    connect_timeout: float = 10.0  # seconds to resolve and connect
    idle_timeout: float = 120.0  # seconds without a byte either way end a tunnel


class Stream(Protocol):
    async def receive(self, max_bytes: int = BLOCK) -> bytes: ...
    async def send(self, item: bytes) -> None: ...
    async def send_eof(self) -> None: ...


class Connection:
    """One connection accepted on a sandbox's proxy socket (Unix, or loopback TCP for
    ``prepare_loopback``), over asyncio's ``sock_recv`` and ``sock_sendall``. Not anyio's
    UNIXSocketStream: on asyncio, a receive cancelled in the loop iteration where its socket became
    readable makes a loop callback raise InvalidStateError (the race of agronholm/anyio#1267, still
    in 4.16's ``_wait_until_readable``), and cancelling is how a tunnel ends here; asyncio's own
    calls handle that case (bpo-30064). The sidecar runs anyio on asyncio."""

    def __init__(self, sock: socket.socket) -> None:
        sock.setblocking(False)
        self._sock = sock

    async def receive(self, max_bytes: int = BLOCK) -> bytes:
        data = await asyncio.get_running_loop().sock_recv(self._sock, max_bytes)
        if not data:
            raise anyio.EndOfStream
        return data

    async def send(self, item: bytes) -> None:
        await asyncio.get_running_loop().sock_sendall(self._sock, item)

    async def send_eof(self) -> None:
        self._sock.shutdown(socket.SHUT_WR)

    async def aclose(self) -> None:
        self._sock.close()

    async def __aenter__(self) -> Connection:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._sock.close()


class Refused(Exception):
    """An answer instead of a connection: status, a one-line reason phrase and a body."""

    def __init__(self, status: int, reason: str, body: str) -> None:
        super().__init__(body)
        self.status = status
        self.reason = reason
        self.body = body

    def response(self) -> bytes:
        body = (self.body + "\n").encode()
        reason = self.reason.encode("ascii", "replace")
        return (b"HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\n"
                b"Connection: close\r\n\r\n" % (self.status, reason, len(body))) + body


@dataclass(frozen=True, slots=True)
class Target:
    host: str  # as rules compare it: lower case, no brackets, no trailing dot
    port: int
    tunnel: bool  # CONNECT; else a plain-HTTP request whose rewritten head is ``head``
    head: bytes = b""

    @property
    def netloc(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


class Rules:
    """Which hosts and addresses one sandbox may reach."""

    def __init__(self, allowed_hosts: tuple[str, ...], resolver: Resolver,
                 lookups: anyio.CapacityLimiter | None = None) -> None:
        self.allowed = allowed_hosts
        self._resolver = resolver
        # getaddrinfo runs on the loop's default executor, a few threads the sidecar's own lookups
        # share: sandboxes asking for slow names (any name under a '*.' entry) get a few of them.
        self._lookups = lookups or anyio.CapacityLimiter(2)

    def check_name(self, target: Target) -> None:
        if host_allowed(self.allowed, target.host, target.port):
            return
        listed = ", ".join(self.allowed) or "no host"
        entry = target.host if literal(target.host) is None else target.netloc
        raise Refused(403, f"Forbidden by the sandbox: {target.netloc} is not in sandbox.allowedHosts",
                      f"The sandbox refused a connection to {target.netloc}: this tool may reach only "
                      f"the hosts in sandbox.allowedHosts ({listed}); it was not looked up. To allow it, "
                      f"add {entry!r} to sandbox.allowedHosts (sandbox.network: allowedHosts), in the "
                      "toolset's manifest or in your settings for this tool.")

    async def addresses(self, target: Target) -> list[IPAddress]:
        """The checked addresses to connect to; Refused, or OSError when the name does not resolve."""
        async with self._lookups:
            found = await lookup(self._resolver, target.host, target.port)
        for address in found:
            verdict = classify(address)
            if verdict is None or host_allowed(self.allowed, _show(address), target.port):
                continue
            if verdict.kind == "loopback" and is_loopback_name(target.host):
                continue  # 'localhost' listed as such says plainly that it is this machine
            raise Refused(403, f"Forbidden by the sandbox: {target.netloc} is {verdict.kind}",
                          f"The sandbox refused a connection to {target.netloc}: "
                          f"{resolved_as(target.host, address, verdict)}. A local or private address is "
                          f"reached only when it is listed as itself: add '{_show(address)}' to "
                          "sandbox.allowedHosts.")
        return found


async def handle(client: Connection, rules: Rules, limits: Limits, label: str,
                 refused: Callable[[str], None]) -> None:
    """Serve one client connection to its end; never raises for what the client or upstream does."""
    async with client:
        try:
            head, rest = await _read_head(client, limits.head_bytes, limits.head_timeout)
            target = parse_head(head)
            rules.check_name(target)
            with anyio.fail_after(limits.connect_timeout):
                upstream = await _connect(rules, target)
        except Refused as exc:
            if exc.status == 403:
                log.info("%s: %s", label, exc.body)
                refused(exc.body)
            await answer(client, exc)
            return
        except TimeoutError:
            await answer(client, Refused(504, "Gateway Timeout", f"resolving and connecting took over "
                                         f"{limits.connect_timeout:g} s"))
            return
        except (anyio.EndOfStream, anyio.BrokenResourceError, OSError):
            return  # the client went away before asking for anything
        async with upstream:
            try:
                if target.tunnel:
                    await client.send(b"HTTP/1.1 200 Connection established\r\n\r\n")
                else:
                    await upstream.send(target.head)
                if rest:
                    await upstream.send(rest)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                return
            await relay(client, upstream, limits.idle_timeout)


async def relay(a: Stream, b: Stream, idle: float) -> None:
    """Copy both ways until both ends finish or nothing moves for ``idle`` seconds. Each send waits
    for the other side to take the bytes, so a slow reader slows its writer (no buffering here)."""
    with anyio.move_on_after(idle) as scope:

        async def pump(source: Stream, sink: Stream) -> None:
            try:
                while True:
                    chunk = await source.receive(BLOCK)
                    await sink.send(chunk)
                    scope.deadline = anyio.current_time() + idle
            except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                pass
            try:
                await sink.send_eof()
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                pass

        async with anyio.create_task_group() as tg:
            tg.start_soon(pump, a, b)
            tg.start_soon(pump, b, a)


def parse_head(head: bytes) -> Target:
    """The destination of a request head (the bytes up to and including the blank line)."""
    line, _, fields = head.partition(b"\r\n")
    match = _REQUEST_LINE.fullmatch(line)
    if match is None:
        raise Refused(400, "Bad Request", "the sandbox's proxy expects 'CONNECT host:port HTTP/1.1' or "
                      "a request for an absolute http:// URL")
    method, target = match.group(1), match.group(2).decode("ascii", "replace")
    if method == b"CONNECT":
        host, port = _authority(target, None)
        return Target(host, port, tunnel=True)
    if not target.lower().startswith("http://"):
        raise Refused(400, "Bad Request", f"the sandbox's proxy forwards http:// URLs and CONNECT tunnels "
                      f"(use https through CONNECT), not {target[:80]!r}")
    authority, slash, path = target[len("http://"):].partition("/")
    host, port = _authority(authority, 80)
    return Target(host, port, tunnel=False, head=_origin_head(method, "/" + path if slash else "/",
                                                              fields, authority))


def _authority(text: str, default_port: int | None) -> tuple[str, int]:
    if "@" in text:
        raise Refused(400, "Bad Request", "a proxied URL may not carry a user name or password")
    host, port_text = text, ""
    if text.startswith("["):
        close = text.find("]")
        host, port_text = text[:close + 1], text[close + 2:] if text[close + 1:close + 2] == ":" else ""
    elif ":" in text:
        host, _, port_text = text.rpartition(":")
    if port_text.isdigit() and 0 < int(port_text) < 65536:
        port = int(port_text)
    elif not port_text and default_port is not None:
        port = default_port
    else:
        raise Refused(400, "Bad Request", f"{text[:100]!r} is not host:port")
    host = host.lower()
    if not _HOST.fullmatch(host):
        raise Refused(400, "Bad Request", f"{host[:100]!r} is not a host name")
    return host_name(host), port


def _origin_head(method: bytes, path: str, fields: bytes, authority: str) -> bytes:
    """The request as the origin server expects it: origin-form target, the proxy's own headers
    dropped, one request per connection (``Connection: close``)."""
    kept = [b"%s %s HTTP/1.1" % (method, path.encode("ascii", "replace"))]
    has_host = False
    for field in fields.split(b"\r\n"):
        if not field:
            continue
        name = field.partition(b":")[0].strip().lower()
        if name in _HOP_BY_HOP:
            continue
        has_host = has_host or name == b"host"
        kept.append(field)
    if not has_host:
        kept.append(b"Host: " + authority.encode("ascii", "replace"))
    kept.append(b"Connection: close")
    return b"\r\n".join(kept) + b"\r\n\r\n"


async def _read_head(client: Stream, limit: int, within: float) -> tuple[bytes, bytes]:
    """The request head through its blank line, and whatever the client sent after it."""
    buffer = b""
    with anyio.move_on_after(within):
        while True:
            end = buffer.find(b"\r\n\r\n")
            if end >= 0:
                return buffer[:end + 4], buffer[end + 4:]
            if len(buffer) > limit:
                raise Refused(431, "Request Header Fields Too Large", f"the request head is over {limit} bytes")
            buffer += await client.receive(BLOCK)
    raise Refused(408, "Request Timeout", f"the request head did not arrive within {within:g} s")


async def _connect(rules: Rules, target: Target) -> anyio.abc.SocketStream:
    try:
        addresses = await rules.addresses(target)
    except OSError as exc:
        raise Refused(502, "Bad Gateway", f"cannot resolve {target.host}: {exc}") from exc
    failure: OSError | None = None
    for address in addresses:
        try:
            return await anyio.connect_tcp(str(address), target.port)
        except OSError as exc:
            failure = exc
    raise Refused(502, "Bad Gateway", f"cannot connect to {target.netloc}: {failure}")


async def answer(client: Stream, refusal: Refused) -> None:
    """Send ``refusal``, then read what the client still sends for a moment (at most 1 MiB):
    closing a socket with unread bytes resets the connection, and the client might lose the answer."""
    try:
        with anyio.move_on_after(5):
            await client.send(refusal.response())
            await client.send_eof()
        with anyio.move_on_after(1):
            drained = 0
            while drained < 1 << 20:
                drained += len(await client.receive(BLOCK))
    except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        pass


def _show(address: IPAddress) -> str:
    """An address as an allowedHosts entry writes it (an IPv4-mapped one as its IPv4 part)."""
    mapped = getattr(address, "ipv4_mapped", None)
    return str(mapped if mapped is not None else address)

"""A real HTTP/1.1 server on 127.0.0.1 for the HTTP-tool tests, scriptable per route.

It speaks the protocol by hand over plain sockets (one thread per connection, keep-alive) because
the hostile cases need what a framework hides: a body that never ends, a 1 GB body produced lazily,
a server that trickles bytes (slow loris), a connection cut mid-body, a raw request target recorded
exactly as the client sent it (so a test can see that `../` or `%2F` stayed inside one segment).

    server = HttpServer().start()          # or the `http_server` fixture in tests/conftest.py
    server.route("GET", "/items/1", Response(json={"id": "1"}))
    server.route("GET", "/flaky", Response(429, headers={"Retry-After": "1"}), Response(json={}))
    server.route("GET", "/echo", handler=echo)
    ... server.url + "/items/1" ...
    server.requests[-1].target, .headers, .body

A route's responses are served in order and the last one repeats. A route may be a callable instead
(`handler=`), given the `Request` and returning a `Response`. Unknown paths answer 404.
"""

from __future__ import annotations

import json as jsonlib
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlsplit

_BLOCK = 64 * 1024


@dataclass
class Request:
    """One request as received: the raw target and headers in the order and case they came in."""

    method: str
    target: str  # the request target, byte for byte (percent-encoding kept)
    headers: list[tuple[str, str]]
    body: bytes
    client: tuple[str, int] = ("", 0)

    @property
    def path(self) -> str:
        return urlsplit(self.target).path

    @property
    def query(self) -> list[tuple[str, str]]:
        """The decoded query parameters, in order (repeats kept)."""
        return parse_qsl(urlsplit(self.target).query, keep_blank_values=True)

    @property
    def raw_query(self) -> str:
        return urlsplit(self.target).query

    def header(self, name: str) -> str | None:
        """The first header of that name (case-insensitive), or None."""
        low = name.lower()
        return next((v for k, v in self.headers if k.lower() == low), None)

    def header_all(self, name: str) -> list[str]:
        low = name.lower()
        return [v for k, v in self.headers if k.lower() == low]

    def json(self) -> Any:
        return jsonlib.loads(self.body)

    def form(self) -> list[tuple[str, str]]:
        """An application/x-www-form-urlencoded body, decoded."""
        return parse_qsl(self.body.decode("latin-1"), keep_blank_values=True)


@dataclass
class Response:
    """What a route answers. Without `chunks`, `size` or `forever` the body is sent with a Content-Length."""

    status: int = 200
    json: Any = None  # a JSON body (sets Content-Type: application/json)
    body: bytes | str = b""  # a raw body (str is UTF-8)
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds before the status line goes out
    chunks: list[bytes] | None = None  # send Transfer-Encoding: chunked, one chunk per item
    chunk_delay: float = 0.0  # seconds between chunks (and between `forever` blocks)
    size: int | None = None  # a body of this many bytes, produced lazily (a 1 GB response costs no memory)
    forever: bool = False  # a chunked body that never ends (until the client goes away)
    close_after: int | None = None  # send this many body bytes, then close the connection
    byte_delay: float = 0.0  # trickle the whole response (status line included) one byte at a time
    content_length: int | None = None  # announce this Content-Length whatever the body is (a lie, for tests)

    def payload(self) -> bytes:
        if self.json is not None:
            return jsonlib.dumps(self.json).encode()
        return self.body.encode() if isinstance(self.body, str) else self.body


def echo(request: Request) -> Response:
    """A handler that answers with what it received, as JSON."""
    body: Any
    try:
        body = request.json() if request.body else None
    except ValueError:
        body = request.body.decode("utf-8", "replace")
    return Response(
        json={
            "method": request.method,
            "target": request.target,
            "path": request.path,
            "query": request.query,
            "headers": request.headers,
            "body": body,
        }
    )


Handler = Callable[[Request], Response]


class _Route:
    def __init__(self, responses: tuple[Response, ...], handler: Handler | None) -> None:
        self.responses = list(responses)
        self.handler = handler
        self.served = 0

    def next(self, request: Request) -> Response:
        if self.handler is not None:
            return self.handler(request)
        index = min(self.served, len(self.responses) - 1)
        self.served += 1
        return self.responses[index]


class HttpServer:
    def __init__(self, host: str = "127.0.0.1", port: int = 0, tls: ssl.SSLContext | None = None) -> None:
        """`host` may be any local address (127.0.0.2, ::1); `tls` serves HTTPS with that context and
        records the name each client sent in SNI (`server_names`)."""
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._sock = socket.create_server((host, port), family=family, backlog=256)
        self._tls = tls
        self.server_names: list[str | None] = []
        if tls is not None:
            tls.sni_callback = lambda _sock, name, _ctx: self.server_names.append(name)  # type: ignore[assignment] -- returns None, as ssl expects
        self._routes: dict[tuple[str, str], _Route] = {}
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._conns: set[socket.socket] = set()
        self.requests: list[Request] = []
        self.connections = 0  # how many TCP connections were accepted (to see keep-alive and retries)
        self.aborted = threading.Event()  # a client went away before a response body was complete
        self._thread = threading.Thread(target=self._accept, name="http-test-server", daemon=True)

    # -- set up ---------------------------------------------------------------------------------

    @property
    def host(self) -> str:
        return self._sock.getsockname()[0]

    @property
    def port(self) -> int:
        return self._sock.getsockname()[1]

    @property
    def url(self) -> str:
        return f"{'https' if self._tls else 'http'}://{self.netloc}"

    @property
    def netloc(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    def route(self, method: str, path: str, *responses: Response, handler: Handler | None = None) -> None:
        """Script `method path` (method "*" matches any). Replaces an earlier script of the same route."""
        if not responses and handler is None:
            raise ValueError("give responses or a handler")
        with self._lock:
            self._routes[(method.upper(), path)] = _Route(responses, handler)

    def requests_to(self, path: str) -> list[Request]:
        with self._lock:
            return [r for r in self.requests if r.path == path]

    def wait_for(self, count: int, timeout: float = 5.0) -> list[Request]:
        """Block until at least `count` requests arrived (for tests that start a call and look before it ends)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if len(self.requests) >= count:
                    return list(self.requests)
            time.sleep(0.01)
        raise TimeoutError(f"{len(self.requests)} requests arrived, expected {count}")

    def start(self) -> HttpServer:
        self._thread.start()
        return self

    def close(self) -> None:
        self._closed.set()
        try:
            self._sock.shutdown(socket.SHUT_RDWR)  # wakes the thread blocked in accept() (close alone does not)
        except OSError:
            pass
        try:
            self._sock.close()
        except OSError:
            pass
        with self._lock:
            conns = list(self._conns)
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            conn.close()
        if self._thread.ident is not None:  # (closed without being started: nothing to wait for)
            self._thread.join(timeout=2)

    def __enter__(self) -> HttpServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- serving --------------------------------------------------------------------------------

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                conn, addr = self._sock.accept()
            except OSError:
                return
            with self._lock:
                self._conns.add(conn)
                self.connections += 1
            threading.Thread(target=self._serve, args=(conn, addr), daemon=True).start()

    def _serve(self, conn: socket.socket, addr: tuple[str, int]) -> None:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self._tls is not None:
            try:
                secure = self._tls.wrap_socket(conn, server_side=True)
            except OSError:  # a failed handshake (ssl.SSLError is an OSError): the client gave up
                with self._lock:
                    self._conns.discard(conn)
                conn.close()
                return
            with self._lock:
                self._conns.discard(conn)
                self._conns.add(secure)
            conn = secure
        reader = conn.makefile("rb")
        try:
            while not self._closed.is_set():
                request = _read_request(reader, addr)
                if request is None:
                    return
                with self._lock:
                    self.requests.append(request)
                    route = self._routes.get((request.method, request.path)) or self._routes.get(("*", request.path))
                response = route.next(request) if route else Response(404, json={"error": f"no route {request.path}"})
                if not self._send(conn, request, response):
                    return
                if (request.header("connection") or "").lower() == "close":
                    return
        except (OSError, ValueError):
            return
        finally:
            with self._lock:
                self._conns.discard(conn)
            try:
                reader.close()
                conn.close()
            except OSError:
                pass

    def _send(self, conn: socket.socket, request: Request, response: Response) -> bool:
        """Write one response; False when the connection must close afterwards."""
        if response.delay:
            if self._closed.wait(response.delay):
                return False
        payload = response.payload()
        headers = dict(response.headers)
        lower = {k.lower() for k in headers}
        if response.json is not None and "content-type" not in lower:
            headers["Content-Type"] = "application/json"
        chunked = response.chunks is not None or response.forever
        if chunked:
            headers["Transfer-Encoding"] = "chunked"
        elif response.content_length is not None:
            headers["Content-Length"] = str(response.content_length)
        elif response.size is not None:
            headers["Content-Length"] = str(response.size)
        else:
            headers["Content-Length"] = str(len(payload))
        keep = response.close_after is None and "connection" not in lower
        if not keep and "connection" not in lower:
            headers["Connection"] = "close"
        head = f"HTTP/1.1 {response.status} {_reason(response.status)}\r\n"
        head += "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
        try:
            self._write(conn, head.encode("latin-1"), response.byte_delay)
            if request.method == "HEAD":
                return keep
            sent = 0
            for block in _body(response, payload):
                if response.close_after is not None and sent + len(block) >= response.close_after:
                    self._write(conn, block[: response.close_after - sent], response.byte_delay)
                    return False
                self._write(conn, block, response.byte_delay)
                sent += len(block)
                if response.chunk_delay and self._closed.wait(response.chunk_delay):
                    return False
            if chunked:
                self._write(conn, b"0\r\n\r\n", response.byte_delay)
        except OSError:
            self.aborted.set()
            return False
        return keep

    def _write(self, conn: socket.socket, data: bytes, byte_delay: float) -> None:
        if not byte_delay:
            conn.sendall(data)
            return
        for i in range(len(data)):
            if self._closed.wait(byte_delay):
                raise OSError("server closing")
            conn.sendall(data[i : i + 1])


def _body(response: Response, payload: bytes) -> Iterator[bytes]:
    """The body as wire blocks (chunk framing included when chunked)."""
    if response.forever:
        block = payload or b"x" * _BLOCK
        while True:
            yield b"%x\r\n%s\r\n" % (len(block), block)
    if response.chunks is not None:
        for chunk in response.chunks:
            if chunk:
                yield b"%x\r\n%s\r\n" % (len(chunk), chunk)
        return
    if response.size is not None:
        left = response.size
        zeros = b"0" * _BLOCK
        while left > 0:
            n = min(left, _BLOCK)
            yield zeros[:n]
            left -= n
        return
    if payload:
        yield payload


def _read_request(reader: Any, addr: tuple[str, int]) -> Request | None:
    line = reader.readline(65537)
    while line in (b"\r\n", b"\n"):
        line = reader.readline(65537)
    if not line:
        return None
    method, target, _version = line.decode("latin-1").rstrip("\r\n").split(" ", 2)
    headers: list[tuple[str, str]] = []
    while True:
        raw = reader.readline(65537)
        if not raw or raw in (b"\r\n", b"\n"):
            break
        name, _, value = raw.decode("latin-1").rstrip("\r\n").partition(":")
        headers.append((name, value.strip()))
    lookup = {k.lower(): v for k, v in headers}
    body = b""
    if lookup.get("transfer-encoding", "").lower() == "chunked":
        parts: list[bytes] = []
        while True:
            size = int(reader.readline(65537).split(b";")[0].strip(), 16)
            if size == 0:
                while reader.readline(65537) not in (b"\r\n", b"\n", b""):
                    pass
                break
            parts.append(reader.read(size))
            reader.readline(65537)
        body = b"".join(parts)
    elif "content-length" in lookup:
        body = reader.read(int(lookup["content-length"]))
    return Request(method=method.upper(), target=target, headers=headers, body=body, client=addr)


_REASONS = {
    200: "OK", 201: "Created", 204: "No Content", 301: "Moved Permanently", 302: "Found", 303: "See Other",
    307: "Temporary Redirect", 308: "Permanent Redirect", 400: "Bad Request", 401: "Unauthorized",
    403: "Forbidden", 404: "Not Found", 429: "Too Many Requests", 500: "Internal Server Error",
    502: "Bad Gateway", 503: "Service Unavailable", 504: "Gateway Timeout",
}


def _reason(status: int) -> str:
    return _REASONS.get(status, "Status")


def inventory(server: HttpServer) -> HttpServer:
    """The small inventory API the example toolset (tests/fixtures/toolsets/http_example) is written
    for, as scripts/demo.py and scripts/bench_http.py serve it."""
    items = {"1": {"id": "1", "name": "Lamp", "price": 12.5}, "2": {"id": "2", "name": "Desk", "price": 149.0}}
    for item_id, item in items.items():
        server.route("GET", f"/items/{item_id}", Response(json={"item": item}))
        server.route("GET", f"/items/{item_id}/note", Response(body=f"{item['name']}: handle with care",
                                                                  headers={"Content-Type": "text/plain"}))
    server.route("GET", "/items/slow", Response(json={"item": {"id": "slow", "name": "Sloth", "price": 1}},
                                                delay=0.05))
    server.route("GET", "/items", handler=lambda r: Response(json=[
        i for i in items.values() if dict(r.query).get("q", "").lower() in i["name"].lower()]))
    server.route("POST", "/items", handler=lambda r: Response(201, json={"id": "3", **r.json()}))
    server.route("POST", "/login", handler=lambda r: Response(json={"token": "t-" + dict(r.form()).get("user", "")}))
    server.route("GET", "/orders", handler=lambda r: Response(json={"orders": [
        {"id": 7, "for": (r.header("authorization") or "").removeprefix("Bearer t-")}]}))
    return server


if __name__ == "__main__":
    # python -m tests.http_server: the inventory API on a free port for scripts; prints its URL,
    # serves until its stdin closes.
    import sys

    with inventory(HttpServer()) as running:
        print(running.url, flush=True)
        sys.stdin.read()

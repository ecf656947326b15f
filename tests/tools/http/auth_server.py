"""A real HTTP server on 127.0.0.1 for the auth helpers' tests: an OAuth2 token endpoint that issues
expiring tokens (client credentials and refresh tokens, optionally rotated) and counts its requests,
a protected resource that takes only a live token, and an echo route; every request it gets is
recorded as it arrived (method, raw path, headers, body bytes)."""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote


@dataclass
class Received:
    method: str
    target: str  # the raw request target: path and query exactly as sent
    headers: dict[str, str]
    body: bytes

    @property
    def path(self) -> str:
        return self.target.partition("?")[0]

    @property
    def query(self) -> str:
        return self.target.partition("?")[2]


@dataclass
class AuthServer:
    client_id: str = "client-1"
    client_secret: str = "cs-Zt8Qw3Lp5Vn2"
    expires_in: int | None = 3600
    rotate: bool = False  # a refresh grant answers a new refresh token and voids the old one
    always_401: bool = False  # the protected route refuses every token (a revoked client)
    token_delay: float = 0.0  # seconds the token endpoint waits: concurrent callers overlap
    received: list[Received] = field(default_factory=list)
    token_requests: list[dict[str, Any]] = field(default_factory=list)
    live: set[str] = field(default_factory=set)  # access tokens the resource takes
    refresh_tokens: set[str] = field(default_factory=set)  # refresh tokens the endpoint takes
    port: int = 0
    _n: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def revoke(self) -> None:
        """Every access token issued so far stops working (as a server-side expiry would)."""
        with self._lock:
            self.live.clear()

    def _issue(self, grant: str) -> dict[str, Any]:
        with self._lock:
            self._n += 1
            token = f"at-{self._n}-Hq7Xv2Lr9K"
            self.live.add(token)
            answer: dict[str, Any] = {"access_token": token, "token_type": "Bearer"}
            if self.expires_in is not None:
                answer["expires_in"] = self.expires_in
            if grant == "refresh_token" and self.rotate:
                new = f"rt-{self._n}-Pz4Mk8Wd1S"
                self.refresh_tokens.add(new)
                answer["refresh_token"] = new
            return answer

    def handle(self, h: BaseHTTPRequestHandler, body: bytes) -> tuple[int, dict[str, str], bytes]:
        rec = Received(h.command, h.path, {k.lower(): v for k, v in h.headers.items()}, body)
        self.received.append(rec)
        if rec.path == "/token":
            return self._token(rec)
        if rec.path.startswith("/protected"):
            auth = rec.headers.get("authorization", "")
            token = auth.removeprefix("Bearer ")
            if self.always_401 or not auth.startswith("Bearer ") or token not in self.live:
                return 401, {"WWW-Authenticate": 'Bearer error="invalid_token"'}, b'{"error":"invalid_token"}'
            return 200, {"Content-Type": "application/json"}, json.dumps({"ok": True, "token": token}).encode()
        return 200, {"Content-Type": "application/json"}, b'{"echo":true}'

    def _token(self, rec: Received) -> tuple[int, dict[str, str], bytes]:
        if self.token_delay:
            time.sleep(self.token_delay)
        form = {k: v[0] for k, v in parse_qs(rec.body.decode()).items()}
        client_id, secret = form.get("client_id"), form.get("client_secret")
        auth = rec.headers.get("authorization", "")
        if auth.startswith("Basic "):
            user, _, password = base64.b64decode(auth[6:]).decode().partition(":")
            client_id, secret = unquote(user), unquote(password)
        self.token_requests.append({"form": form, "client_id": client_id, "basic": auth.startswith("Basic ")})
        json_ = {"Content-Type": "application/json"}
        if client_id != self.client_id or secret != self.client_secret:
            # Echoes what it got, as careless servers do: the helper must mask it.
            return 401, json_, json.dumps({"error": "invalid_client",
                                           "error_description": f"bad secret {secret}"}).encode()
        grant = form.get("grant_type")
        if grant == "refresh_token":
            rt = form.get("refresh_token")
            with self._lock:
                if rt not in self.refresh_tokens:
                    return 400, json_, b'{"error":"invalid_grant","error_description":"refresh token unknown"}'
                if self.rotate:
                    self.refresh_tokens.discard(rt)
        elif grant != "client_credentials":
            return 400, json_, b'{"error":"unsupported_grant_type"}'
        return 200, json_, json.dumps(self._issue(grant)).encode()


@contextmanager
def auth_server(**kwargs: Any) -> Iterator[AuthServer]:
    server = AuthServer(**kwargs)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _any(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            status, headers, out = server.handle(self, body)
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        do_GET = do_POST = do_PUT = do_DELETE = _any

        def log_message(self, format: str, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    server.port = httpd.server_address[1]
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        httpd.shutdown()
        httpd.server_close()

"""An OAuth2 token endpoint and a protected resource, as handlers on the shared local test server
(tests/http_server.py): the endpoint issues expiring tokens (client credentials and refresh tokens,
optionally rotated) and counts its requests; the resource takes only a live token; ``/echo...``
routes answer anything. Every request is recorded by the server as it arrived."""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, unquote

from tests.http_server import HttpServer, Request, Response

ECHO_PATHS = ("/echo", "/echo/a%2Fb", "/echo/i%2Fj")


@dataclass
class AuthServer:
    http: HttpServer
    client_id: str = "client-1"
    client_secret: str = "cs-Zt8Qw3Lp5Vn2"
    expires_in: int | None = 3600
    rotate: bool = False  # a refresh grant answers a new refresh token and voids the old one
    always_401: bool = False  # the protected route refuses every token (a revoked client)
    token_delay: float = 0.0  # seconds the token endpoint waits: concurrent callers overlap
    token_requests: list[dict[str, Any]] = field(default_factory=list)
    live: set[str] = field(default_factory=set)  # access tokens the resource takes
    refresh_tokens: set[str] = field(default_factory=set)  # refresh tokens the endpoint takes
    _n: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.http.route("POST", "/token", handler=self._token)
        self.http.route("*", "/protected", handler=self._protected)
        for path in ECHO_PATHS:
            self.http.route("*", path, Response(json={"echo": True}))

    @property
    def url(self) -> str:
        return self.http.url

    @property
    def received(self) -> list[Request]:
        return self.http.requests

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

    def _protected(self, rec: Request) -> Response:
        auth = rec.header("authorization") or ""
        token = auth.removeprefix("Bearer ")
        if self.always_401 or not auth.startswith("Bearer ") or token not in self.live:
            return Response(401, json={"error": "invalid_token"},
                            headers={"WWW-Authenticate": 'Bearer error="invalid_token"'})
        return Response(json={"ok": True, "token": token})

    def _token(self, rec: Request) -> Response:
        if self.token_delay:
            time.sleep(self.token_delay)
        form = {k: v[0] for k, v in parse_qs(rec.body.decode()).items()}
        client_id, secret = form.get("client_id"), form.get("client_secret")
        auth = rec.header("authorization") or ""
        if auth.startswith("Basic "):
            user, _, password = base64.b64decode(auth[6:]).decode().partition(":")
            client_id, secret = unquote(user), unquote(password)
        self.token_requests.append({"form": form, "client_id": client_id, "basic": auth.startswith("Basic ")})
        if client_id != self.client_id or secret != self.client_secret:
            # Echoes what it got, as careless servers do: the helper must mask it.
            return Response(401, json={"error": "invalid_client", "error_description": f"bad secret {secret}"})
        grant = form.get("grant_type")
        if grant == "refresh_token":
            rt = form.get("refresh_token")
            with self._lock:
                if rt not in self.refresh_tokens:
                    return Response(400, json={"error": "invalid_grant", "error_description": "refresh token unknown"})
                if self.rotate:
                    self.refresh_tokens.discard(rt)
        elif grant != "client_credentials":
            return Response(400, json={"error": "unsupported_grant_type"})
        return Response(body=json.dumps(self._issue(grant)), headers={"Content-Type": "application/json"})


@contextmanager
def auth_server(**kwargs: Any) -> Iterator[AuthServer]:
    with HttpServer() as http:
        yield AuthServer(http, **kwargs)

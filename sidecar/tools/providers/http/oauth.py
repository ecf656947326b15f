"""OAuth2 tokens of HTTP tools (RFC 6749 client credentials, §4.4, and refresh token, §6): got from
the tool's token endpoint, cached in the secret store and renewed before they expire or on a 401.

The cache of a tool is the secret store's internal entry ``oauth:<toolsetId>:<toolId>``, a JSON
object ``{accessToken, expiresAt, refreshAt, refreshToken, source}``: it outlives a restart (the
store is the keystore or the 0600 file), and a rotated refresh token replaces the one before it
there. ``source`` is a digest of what the token was got with (endpoint, client, grant, scope,
audience, the configured refresh token): when the manifest or a secret changes, the cached token
is dropped rather than used against the new settings.

A token is renewed ``EXPIRY_MARGIN`` (60 s) before it expires, or half way through a token that
lives less than twice that; a token without ``expires_in`` is kept until a 401. Calls of one tool
share one lock, so concurrent calls that find the token stale (or get a 401 with the same token)
make one token request between them.

The token endpoint is reached through the transport the caller gives (the tool's destination
guard), without following redirects; its errors name the endpoint with secrets masked.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol
from urllib.parse import quote

import anyio
import msgspec

from ....errors import SidecarError, StorageError, UpstreamError
from ....secrets.known import remember
from ....secrets.masking import clean, mask_url

if TYPE_CHECKING:  # httpx2 is heavy: loaded at the first token request
    import httpx2

log = logging.getLogger("sidecar.tools.http")

EXPIRY_MARGIN = 60.0  # seconds before expiry a token is renewed: covers clock skew and a slow call
TOKEN_TIMEOUT = 30.0  # seconds for the whole token request
MAX_TOKEN_RESPONSE = 256 * 1024  # bytes: a token response is a few hundred; more is not a token endpoint
GrantType = Literal["client_credentials", "refresh_token"]
AuthMethod = Literal["client_secret_basic", "client_secret_post"]


def cache_name(tool_id: str) -> str:
    """``oauth:<toolsetId>:<toolId>`` for the canonical ``toolsetId:toolId``: lower-case and holding
    ':', so it never collides with a user's secret."""
    return f"oauth:{tool_id}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Grant:
    """One tool's token request, its secrets resolved."""

    tool_id: str  # canonical toolsetId:toolId
    grant: GrantType
    token_url: str
    client_id: str
    client_secret: str | None
    refresh_token: str | None  # the configured one; a rotated one lives in the cache
    scope: str | None = None
    audience: str | None = None
    auth_method: AuthMethod = "client_secret_basic"
    transport: Callable[[], httpx2.AsyncBaseTransport] | None = None  # the destination guard's

    @property
    def source(self) -> str:
        parts = [self.grant, self.token_url, self.client_id, self.client_secret or "", self.refresh_token or "",
                 self.scope or "", self.audience or "", self.auth_method]
        return hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:32]


class _Cached(msgspec.Struct, rename="camel", kw_only=True):
    access_token: str
    source: str
    expires_at: float | None = None
    refresh_at: float | None = None
    refresh_token: str | None = None


class TokenStore(Protocol):
    """What the cache needs of the secret store."""

    async def get(self, name: str) -> str | None: ...
    async def set(self, name: str, value: str) -> None: ...
    async def delete(self, name: str) -> bool: ...
    async def names(self) -> list[str]: ...


class OAuthTokens:
    """Every HTTP tool's OAuth2 token: one per tool, in memory and in the secret store."""

    def __init__(self, secrets: TokenStore, *, clock: Callable[[], float] = time.time) -> None:
        self.secrets = secrets
        self._clock = clock
        self._cached: dict[str, _Cached] = {}
        self._locks: dict[str, anyio.Lock] = {}
        self.requests = 0  # token requests made by this process (tests and the log read it)

    async def token(self, grant: Grant) -> str:
        """A token that is not about to expire: the cached one, else a new one."""
        name = cache_name(grant.tool_id)
        cached = self._cached.get(name)
        if cached is not None and self._fresh(cached, grant):
            return cached.access_token
        async with self._lock(name):
            cached = await self._load(name)
            if cached is not None and self._fresh(cached, grant):
                return cached.access_token
            return (await self._renew(grant, cached)).access_token

    async def refresh(self, grant: Grant, *, stale: str | None) -> str:
        """A new token after ``stale`` got a 401; when another call replaced it meanwhile, that one."""
        name = cache_name(grant.tool_id)
        async with self._lock(name):
            cached = await self._load(name)
            if cached is not None and cached.source == grant.source and cached.access_token != stale:
                return cached.access_token
            return (await self._renew(grant, cached)).access_token

    async def forget(self, toolset_id: str) -> None:
        """An uninstalled toolset's tokens leave the store."""
        prefix = cache_name(f"{toolset_id}:")
        for name in [n for n in self._cached if n.startswith(prefix)]:
            del self._cached[name]
        for name in await self.secrets.names():
            if name.startswith(prefix):
                await self.secrets.delete(name)

    # -- inside --------------------------------------------------------------------------------

    def _lock(self, name: str) -> anyio.Lock:
        lock = self._locks.get(name)
        if lock is None:
            lock = self._locks[name] = anyio.Lock()
        return lock

    def _fresh(self, cached: _Cached, grant: Grant) -> bool:
        return cached.source == grant.source and (cached.refresh_at is None or self._clock() < cached.refresh_at)

    async def _load(self, name: str) -> _Cached | None:
        cached = self._cached.get(name)
        if cached is not None:
            return cached
        try:
            text = await self.secrets.get(name)
        except StorageError as exc:
            log.warning("the cached OAuth2 token %s cannot be read (%s); a new one is requested", name, exc.message)
            return None
        if text is None:
            return None
        try:
            cached = msgspec.json.decode(text, type=_Cached)
        except msgspec.DecodeError:
            log.warning("the cached OAuth2 token %s is not readable; a new one is requested", name)
            return None
        remember(cached.access_token)
        remember(cached.refresh_token)
        self._cached[name] = cached
        return cached

    async def _renew(self, grant: Grant, cached: _Cached | None) -> _Cached:
        refresh_token = grant.refresh_token
        if cached is not None and cached.source == grant.source and cached.refresh_token:
            refresh_token = cached.refresh_token  # the rotated one: the configured one may be spent
        answer = await self._request(grant, refresh_token)
        now = self._clock()
        lifetime = _seconds(answer.get("expires_in"))
        new = _Cached(
            access_token=answer["access_token"], source=grant.source,
            expires_at=None if lifetime is None else now + lifetime,
            refresh_at=None if lifetime is None else now + max(lifetime - EXPIRY_MARGIN, lifetime / 2),
            refresh_token=answer.get("refresh_token") or (refresh_token if grant.grant == "refresh_token" else None))
        remember(new.access_token)
        remember(new.refresh_token)
        name = cache_name(grant.tool_id)
        self._cached[name] = new
        try:
            await self.secrets.set(name, msgspec.json.encode(new).decode())
        except StorageError as exc:
            # The call goes on with the token; only a restart loses it (and, rotated, the refresh token).
            log.warning("the OAuth2 token of %s could not be kept in the secret store: %s", grant.tool_id, exc.message)
        rotated = " (refresh token rotated)" if answer.get("refresh_token") and grant.grant == "refresh_token" else ""
        log.info("OAuth2 token of %s renewed from %s%s%s", grant.tool_id, mask_url(grant.token_url),
                 "" if lifetime is None else f", valid {lifetime:.0f} s", rotated)
        return new

    async def _request(self, grant: Grant, refresh_token: str | None) -> dict[str, Any]:
        import httpx2  # heavy (the HTTP client): the first token request loads it

        where = clean(mask_url(grant.token_url))
        form = {"grant_type": grant.grant}
        if grant.grant == "refresh_token" and refresh_token:
            form["refresh_token"] = refresh_token
        if grant.scope:
            form["scope"] = grant.scope
        if grant.audience:
            form["audience"] = grant.audience
        headers = {"Accept": "application/json"}
        if grant.client_secret is not None and grant.auth_method == "client_secret_basic":
            # RFC 6749 §2.3.1: each part form-encoded before the two are joined and base64-encoded.
            pair = f"{quote(grant.client_id, safe='')}:{quote(grant.client_secret, safe='')}"
            encoded = base64.b64encode(pair.encode()).decode()
            remember(encoded)
            headers["Authorization"] = f"Basic {encoded}"
        else:
            form["client_id"] = grant.client_id
            if grant.client_secret is not None:
                form["client_secret"] = grant.client_secret
        self.requests += 1
        transport = grant.transport() if grant.transport is not None else None
        try:
            with anyio.fail_after(TOKEN_TIMEOUT):
                async with httpx2.AsyncClient(transport=transport, follow_redirects=False,
                                              timeout=TOKEN_TIMEOUT) as client:
                    async with client.stream("POST", grant.token_url, data=form, headers=headers) as response:
                        body = bytearray()
                        async for chunk in response.aiter_bytes():
                            body += chunk
                            if len(body) > MAX_TOKEN_RESPONSE:
                                raise _fail(grant, f"the token endpoint {where} answered more than "
                                                   f"{MAX_TOKEN_RESPONSE // 1024} KB; that is not a token")
                        status = response.status_code
        except SidecarError:
            raise  # the destination guard's refusal says what to allow
        except TimeoutError:
            raise _fail(grant, f"the token endpoint {where} did not answer within {TOKEN_TIMEOUT:.0f} s") from None
        except httpx2.HTTPError as exc:
            raise _fail(grant, f"the token endpoint {where} could not be reached: "
                               f"{type(exc).__name__}: {clean(str(exc)) or 'no detail'}") from None
        return _answer(grant, where, status, bytes(body))


def _answer(grant: Grant, where: str, status: int, body: bytes) -> dict[str, Any]:
    try:
        data = json.loads(body)
    except ValueError:
        data = None
    if status // 100 != 2:
        reason = ""
        if isinstance(data, dict):
            error, detail = data.get("error"), data.get("error_description")
            reason = ": " + clean(" - ".join(str(x)[:300] for x in (error, detail) if x)) if error or detail else ""
        hint = " (check clientId, clientSecret and the refresh token)" if status in (400, 401) else ""
        raise _fail(grant, f"the token endpoint {where} answered {status}{reason}{hint}")
    if not isinstance(data, dict) or not isinstance(data.get("access_token"), str) or not data["access_token"]:
        raise _fail(grant, f"the token endpoint {where} answered {status} without an access_token in a JSON object")
    token_type = data.get("token_type")
    if isinstance(token_type, str) and token_type.lower() != "bearer":
        raise _fail(grant, f"the token endpoint {where} gave a {token_type[:40]!r} token; only bearer tokens are used")
    if data.get("refresh_token") is not None and not isinstance(data["refresh_token"], str):
        raise _fail(grant, f"the token endpoint {where} answered a refresh_token that is not a string")
    return data


def _seconds(value: Any) -> float | None:
    """``expires_in``: a number, or a numeric string (some servers quote it); None when absent or silly."""
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        return None
    return seconds if 0 < seconds < 10 * 365 * 86400 else None


def _fail(grant: Grant, message: str) -> UpstreamError:
    return UpstreamError("oauth2", message, grant.tool_id)

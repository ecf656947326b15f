"""OAuth for remote MCP servers through the SDK's client auth (`mcp.client.auth.OAuthClientProvider`).

The SDK does the protocol: discovery from the server's 401 (``WWW-Authenticate`` and protected
resource metadata), authorization server metadata (its ``issuer`` checked), a client ID metadata
document when the server supports one and we have its URL, dynamic client registration otherwise,
PKCE, the ``resource`` indicator, the ``iss`` of the answer (RFC 9207). Here is what it leaves to
its user:

- where tokens and the registration live: the secret store (`signin.py`), with the authorization
  server's metadata, so a refresh after a restart goes to the right token endpoint;
- refreshing ``EXPIRY_MARGIN`` before expiry (the SDK would wait for the expiry itself, and forgets
  the expiry of stored tokens), and on a 401 before asking the user;
- a connection never opens a browser: a server that needs the user gets the status ``needsAuth``
  with the reason, and `sign_in` (``mcpServers/login``) does the browser step: ``ui/openUrl`` with
  the authorization URL, and a loopback listener (`loopback.py`) for the one callback;
- refusals: an authorization, token or registration endpoint over plain HTTP on a host other than
  loopback, the flow's requests to addresses a public server should not steer us to (both in
  `oauth_guard.py`; those requests go through its pinned transport, never the connection's client),
  a registration whose redirect URIs are not our loopback ones.

Import lazily: it imports the SDK and httpx2.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import AsyncGenerator, Callable
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx2
from mcp.client.auth import OAuthClientProvider, OAuthFlowError, OAuthRegistrationError, OAuthTokenError
from mcp.client.auth.oauth2 import OAuthContext
from mcp.shared._httpx_utils import next_request_within_origin  # the SDK's own rule for its flow's redirects
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthMetadata,
    OAuthToken,
    ProtectedResourceMetadata,
)

from ..errors import SidecarError, SignInFailed
from ..secrets import clean, mask_url
from ..secrets.known import remember_all
from . import loopback, signin
from .failures import flatten
from .oauth_guard import Destinations, check_endpoint, is_loopback
from .signin import EXPIRY_MARGIN, OpenUrl, Vault

log = logging.getLogger("sidecar.mcp_host")

CLIENT_NAME = "Covalt"
_OWN_REDIRECT_LIMIT = 5  # as the SDK's `_AUTH_REDIRECT_LIMIT`


class NeedsUser(Exception):
    """A connection got a 401 that only the user can answer (no tokens, or they can't be refreshed)."""


class _Storage:
    """The SDK's `TokenStorage` over one secret-store record (see `signin.py`)."""

    def __init__(self, vault: Vault, key: str, url: str, redirect_uri: str | None) -> None:
        self.vault, self.key, self.url, self.redirect_uri = vault, key, url, redirect_uri
        self.record: dict[str, Any] = {}
        self.metadata: OAuthMetadata | None = None
        self.resource_metadata: ProtectedResourceMetadata | None = None
        self.auth_server_url: str | None = None

    async def load(self) -> None:
        record = await signin.load(self.vault, self.key)
        self.record = record if record.get("url") == self.url else {}
        try:
            if self.record.get("metadata"):
                self.metadata = OAuthMetadata.model_validate(self.record["metadata"])
            if self.record.get("resourceMetadata"):
                self.resource_metadata = ProtectedResourceMetadata.model_validate(self.record["resourceMetadata"])
        except ValueError:
            self.metadata = self.resource_metadata = None
        self.auth_server_url = self.record.get("authServer")
        self._remember()

    def _remember(self) -> None:
        """Scrub the record's tokens and client secret from logs and errors one by one, as HTTP
        tools' OAuth does: the store knows only the whole record, and a server that repeats a bearer
        token in its log or stderr would otherwise be masked only if it looked like a secret."""
        tokens, client = self.record.get("tokens") or {}, self.record.get("client") or {}
        remember_all(str(v) for v in (tokens.get("access_token"), tokens.get("refresh_token"),
                                       client.get("client_secret")) if v)

    @property
    def expires_at(self) -> float | None:
        value = self.record.get("expiresAt")
        return float(value) if isinstance(value, int | float) else None

    async def get_tokens(self) -> OAuthToken | None:
        tokens = self.record.get("tokens")
        return OAuthToken.model_validate(tokens) if tokens else None

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.record["tokens"] = tokens.model_dump(mode="json", exclude_none=True)
        self.record["expiresAt"] = time.time() + int(tokens.expires_in) if tokens.expires_in else None
        await self._save()

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        client = self.record.get("client")
        if not client:
            return None
        info = OAuthClientInformationFull.model_validate(client)
        if self.redirect_uri is not None and self.redirect_uri not in [str(u) for u in info.redirect_uris or []]:
            return None  # registered for another loopback port: register again (they match exactly)
        return info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        for uri in client_info.redirect_uris or []:
            if urlsplit(str(uri)).scheme != "http" or not is_loopback(str(uri)):
                raise OAuthRegistrationError(
                    f"the authorization server registered the redirect URI {mask_url(str(uri))}, which is not "
                    "this machine's loopback address; the sign-in would send its code elsewhere")
        self.record["client"] = client_info.model_dump(mode="json", exclude_none=True)
        await self._save()

    def note_discovery(self, context: OAuthContext) -> None:
        self.metadata = context.oauth_metadata
        self.resource_metadata = context.protected_resource_metadata
        self.auth_server_url = context.auth_server_url

    async def _save(self) -> None:
        self._remember()
        self.record["url"] = self.url
        if self.metadata is not None:
            self.record["metadata"] = self.metadata.model_dump(mode="json", exclude_none=True)
            self.record["issuer"] = str(self.metadata.issuer)
        if self.resource_metadata is not None:
            self.record["resourceMetadata"] = self.resource_metadata.model_dump(mode="json", exclude_none=True)
        if self.auth_server_url is not None:
            self.record["authServer"] = self.auth_server_url
        await signin.save(self.vault, self.key, self.record)


@dataclasses.dataclass
class _Context(OAuthContext):
    """Tokens count as expired `EXPIRY_MARGIN` early, so they are refreshed before a request fails."""

    def update_token_expiry(self, token: OAuthToken) -> None:
        self.token_expiry_time = (time.time() + int(token.expires_in) - _margin(int(token.expires_in))
                                  if token.expires_in else None)


def _margin(lifetime: float) -> float:
    return min(EXPIRY_MARGIN, lifetime / 2)


class Provider(OAuthClientProvider):
    """The SDK's provider with our storage, early refresh, refresh on a 401, and endpoint checks."""

    def __init__(self, *, storage: _Storage, interactive: bool, http_timeout: float,
                 on_needs_user: Callable[[str], None] | None = None, **kwargs: Any) -> None:
        super().__init__(storage=storage, **kwargs)
        self.context = _Context(**{f.name: getattr(self.context, f.name) for f in dataclasses.fields(OAuthContext)})
        self.store = storage
        self.interactive = interactive
        self.refreshing = False
        self._may_refresh = not interactive
        self._on_needs_user = on_needs_user
        self._timeout = httpx2.Timeout(http_timeout).as_dict()
        self._destinations = Destinations(self.context.server_url)

    def _needs_user(self, reason: str) -> NeedsUser:
        # The transport turns whatever a request raises into a failed request: the reason goes to
        # the connection this way, so its status can say it.
        if self._on_needs_user is not None:
            self._on_needs_user(reason)
        return NeedsUser(reason)

    async def _initialize(self) -> None:
        await super()._initialize()
        if self.interactive:
            self.context.current_tokens = None  # a new sign-in: the stored tokens are what did not work
        s = self.store
        self.context.oauth_metadata = self.context.oauth_metadata or s.metadata
        self.context.protected_resource_metadata = self.context.protected_resource_metadata or s.resource_metadata
        self.context.auth_server_url = self.context.auth_server_url or s.auth_server_url
        if s.expires_at is not None:
            tokens = self.context.current_tokens
            lifetime = int(tokens.expires_in) if tokens is not None and tokens.expires_in else 2 * EXPIRY_MARGIN
            self.context.token_expiry_time = s.expires_at - _margin(lifetime)

    async def _perform_authorization(self) -> httpx2.Request:
        metadata = self.context.oauth_metadata
        self.store.note_discovery(self.context)
        if metadata is not None:
            check_endpoint("authorization", str(metadata.authorization_endpoint))
            check_endpoint("token", str(metadata.token_endpoint))
            check_endpoint("registration", str(metadata.registration_endpoint)
                           if metadata.registration_endpoint else None)
        if self._may_refresh and self.context.can_refresh_token():
            # A 401 with tokens in hand: the access token was revoked or expired early. One refresh
            # before the user is asked (the SDK would go straight to the browser).
            self._may_refresh, self.refreshing = False, True
            return await self._refresh_token()
        if not self.interactive:
            raise self._needs_user("this server needs you to sign in (mcpServers/login)")
        return await super()._perform_authorization()

    async def _handle_token_response(self, response: httpx2.Response) -> None:
        if self.refreshing:
            self.refreshing = False
            if not await self._handle_refresh_response(response):
                raise self._needs_user("the sign-in has expired or was revoked; sign in again (mcpServers/login)")
            return
        await super()._handle_token_response(response)

    async def async_auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        # Every request of a connection passes here: with a token that is still good, send it without
        # the SDK's flow (a lock and three generators deep). Anything else, a 401 included, goes the
        # full way (which sends the request again).
        if self._initialized and not self.interactive and self.context.is_token_valid():
            self._add_auth_header(request)
            response = yield request
            if response.status_code not in (401, 403):
                return
        flow = super().async_auth_flow(request)
        try:
            outgoing = await flow.__anext__()
            while True:
                response = yield outgoing
                outgoing = await flow.asend(response)
        except StopAsyncIteration:
            return
        finally:
            await flow.aclose()

    async def _auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        # A connection's 401 with nothing to refresh goes to the user at once: discovery and, worse,
        # a dynamic registration (for a redirect URI no sign-in will listen on) would be wasted.
        flow = super()._auth_flow(request)
        own: httpx2.AsyncClient | None = None
        try:
            outgoing = await flow.__anext__()
            while True:
                if outgoing is request:
                    response = yield outgoing
                    if (not self.interactive and response.status_code == 401
                            and not self.context.can_refresh_token()):
                        raise self._needs_user("this server needs you to sign in (mcpServers/login)")
                else:
                    # The flow's own requests (discovery, registration, token) go where the server
                    # and its metadata point, so not through the connection's client, whose
                    # transport would look the name up again after the check: through one that
                    # connects only to the addresses it checked.
                    own = own or httpx2.AsyncClient(transport=self._destinations.transport(),
                                                    follow_redirects=False)
                    response = await self._send_own(own, outgoing)
                outgoing = await flow.asend(response)
        except StopAsyncIteration:
            return
        finally:
            await flow.aclose()
            if own is not None:
                await own.aclose()

    async def _send_own(self, client: httpx2.AsyncClient, outgoing: httpx2.Request) -> httpx2.Response:
        # httpx times only the request it was handed: the flow's own would wait forever on an
        # endpoint that hangs.
        outgoing.extensions = {**outgoing.extensions, "timeout": self._timeout}
        response = await client.send(outgoing)
        # Within its origin only, as the SDK's driver (RedirectAwareAuth) does for what it is handed.
        for _ in range(_OWN_REDIRECT_LIMIT):
            follow = next_request_within_origin(response)
            if follow is None:
                break
            response = await client.send(follow)
        return response

    async def _refresh_token(self) -> httpx2.Request:
        if self.context.oauth_metadata is not None:
            check_endpoint("token", str(self.context.oauth_metadata.token_endpoint))
        return await super()._refresh_token()


def client_metadata(redirect_uri: str) -> OAuthClientMetadata:
    return OAuthClientMetadata.model_validate({
        "client_name": CLIENT_NAME, "redirect_uris": [redirect_uri],
        "grant_types": ["authorization_code", "refresh_token"], "response_types": ["code"],
        "token_endpoint_auth_method": "none"})


async def connection_auth(vault: Vault, key: str, url: str, *, client_metadata_url: str | None,
                          http_timeout: float, on_needs_user: Callable[[str], None]) -> Provider:
    """The auth of a connection: the stored tokens, refreshed as needed; never the browser.
    `on_needs_user(reason)` is told (and the request fails) when only a sign-in would help."""
    storage = _Storage(vault, key, url, None)
    await storage.load()
    stored = await storage.get_client_info()
    redirect = str(stored.redirect_uris[0]) if stored is not None and stored.redirect_uris \
        else "http://127.0.0.1/callback"
    return Provider(storage=storage, interactive=False, http_timeout=http_timeout, on_needs_user=on_needs_user,
                    server_url=url,
                    client_metadata=client_metadata(redirect), client_metadata_url=client_metadata_url)


async def sign_in(vault: Vault, key: str, url: str, headers: dict[str, str], *, open_url: OpenUrl,
                  client_metadata_url: str | None, http_timeout: float, kind: str,
                  wait: float = signin.SIGN_IN_TIMEOUT) -> None:
    """The browser step: discover, register, send the user to the authorization page through the UI,
    take the one callback on the loopback listener, exchange the code; the tokens go to the store.

    Raises:
        SignInFailed: with what went wrong, for the user.
    """
    storage = _Storage(vault, key, url, None)
    await storage.load()
    stored = await storage.get_client_info()
    port = urlsplit(str(stored.redirect_uris[0])).port or 0 if stored is not None and stored.redirect_uris else 0
    try:
        async with loopback.listen(port) as listener:
            storage.redirect_uri = listener.redirect_uri

            async def redirect_handler(authorization_url: str) -> None:
                check_endpoint("authorization", authorization_url)
                state = parse_qs(urlsplit(authorization_url).query).get("state", [""])[0]
                listener.expect(state)
                log.info("MCP server %s: asking the UI to open the sign-in page", key)
                if not await open_url(key, authorization_url, f"Sign in to the MCP server {key}"):
                    raise SignInFailed("cancelled", "the sign-in page was not opened", server=key)

            async def callback_handler() -> AuthorizationCodeResult:
                try:
                    with anyio.fail_after(wait):
                        got = await listener.wait()
                except TimeoutError:
                    raise SignInFailed("timeout", f"the sign-in was not finished within {wait:g} s",
                                       server=key) from None
                except loopback.CallbackRefused as exc:
                    raise SignInFailed("refused", str(exc), server=key) from None
                if got.error:
                    detail = f" ({clean(got.error_description)})" if got.error_description else ""
                    raise SignInFailed("refused", f"the authorization server refused: {clean(got.error)}{detail}",
                                       server=key)
                if not got.code:
                    raise SignInFailed("refused", "the authorization server sent no code back", server=key)
                return AuthorizationCodeResult(code=got.code, state=got.state, iss=got.iss)

            provider = Provider(storage=storage, interactive=True, http_timeout=http_timeout, server_url=url,
                                client_metadata=client_metadata(listener.redirect_uri),
                                redirect_handler=redirect_handler, callback_handler=callback_handler,
                                client_metadata_url=client_metadata_url)
            async with httpx2.AsyncClient(auth=provider, headers=headers,
                                          timeout=httpx2.Timeout(http_timeout)) as client:
                # Any request to the endpoint starts the flow with its 401; the answer after the
                # sign-in does not matter (a GET without a session may well be a 400), only that it
                # is not another 401.
                async with client.stream("GET", url, headers={"Accept": "text/event-stream"}) as response:
                    status = response.status_code
            if status in (401, 403):
                raise SignInFailed("refused", f"the server still answers HTTP {status} after signing in", server=key)
            if not provider.context.current_tokens:
                log.info("MCP server %s: no sign-in was needed (%s answered %d)", key, kind, status)
    except BaseException as exc:
        failure = _failure(key, exc, http_timeout)
        if failure is exc:
            raise
        raise failure from None


def _failure(key: str, exc: BaseException, http_timeout: float) -> BaseException:
    """What a sign-in that raised `exc` (maybe grouped by the listener's task group) fails with."""
    leaves = [e for e in flatten(exc) if not isinstance(e, anyio.get_cancelled_exc_class())]
    if not leaves or not all(isinstance(e, Exception) for e in leaves):
        return exc  # cancelled, or a KeyboardInterrupt: not ours to reword
    first = leaves[0]
    if isinstance(first, SidecarError):
        return first
    if isinstance(first, httpx2.TimeoutException):
        where = mask_url(str(first.request.url)) if _has_request(first) else "an OAuth endpoint"
        return SignInFailed("timeout", f"{where} did not answer within {http_timeout:g} s", server=key)
    if isinstance(first, OAuthFlowError | OAuthTokenError | OAuthRegistrationError):
        return SignInFailed("refused", clean(str(first)), server=key)
    if isinstance(first, httpx2.HTTPError):
        return SignInFailed("refused", clean(f"{type(first).__name__}: {first}"), server=key)
    if isinstance(first, ValueError):  # pydantic: metadata or a token answer that is not what OAuth says
        return SignInFailed("refused", clean(f"an invalid answer from the authorization server: {first}"),
                            server=key)
    return first


def _has_request(exc: httpx2.HTTPError) -> bool:
    try:
        exc.request  # noqa: B018 - raises RuntimeError when the error has no request
    except RuntimeError:
        return False
    return True


async def revoke(vault: Vault, key: str, *, http_timeout: float) -> None:
    """Ask the authorization server to revoke a server's tokens (RFC 7009), where it has a revocation
    endpoint. Best effort: signing out is forgetting them, which the caller does whatever happens here."""
    record = await signin.load(vault, key)
    tokens, client = record.get("tokens") or {}, record.get("client") or {}
    endpoint = (record.get("metadata") or {}).get("revocation_endpoint")
    if not endpoint or not tokens or not client.get("client_id"):
        return
    try:
        check_endpoint("revocation", endpoint)
        auth = {"client_id": client["client_id"]}
        if client.get("client_secret") and client.get("token_endpoint_auth_method") != "none":
            auth["client_secret"] = client["client_secret"]
        destinations = Destinations(str(record.get("url") or ""))
        async with httpx2.AsyncClient(transport=destinations.transport(), timeout=http_timeout,
                                      follow_redirects=False) as http:
            for hint in ("refresh_token", "access_token"):
                if tokens.get(hint):
                    response = await http.post(endpoint, data={"token": tokens[hint], "token_type_hint": hint, **auth})
                    if response.status_code >= 400:
                        log.info("MCP server %s: revoking its %s answered HTTP %d", key, hint, response.status_code)
    except (httpx2.HTTPError, OAuthFlowError) as exc:
        log.info("MCP server %s: its tokens could not be revoked (%s); they are forgotten here", key, clean(str(exc)))


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
  with the reason (its challenge kept, `oauth_challenge.py`), and ``mcpServers/login``
  (`oauth_login.py`) does the browser step: ``ui/openUrl`` with the authorization URL, and a
  loopback listener (`loopback.py`) for the one callback;
- the user's pre-registered client and the client-credentials grant (`oauth_client.py`), and a
  2025-03-26 server's root metadata naming an issuer path on its own origin (`_legacy_metadata`);
- refusals: an authorization, token or registration endpoint over plain HTTP on a host other than
  loopback, the flow's requests to addresses a public server should not steer us to (both in
  `oauth_guard.py`; those requests go through its pinned transport, never the connection's client),
  a registration whose redirect URIs are not our loopback ones.

Import lazily: it imports the SDK and httpx2.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import AsyncGenerator, Callable
from typing import Any
from urllib.parse import urlsplit

import httpx2
from mcp.client.auth import OAuthClientProvider, OAuthFlowError, OAuthRegistrationError
from mcp.client.auth.oauth2 import OAuthContext
from mcp.client.auth.utils import union_scopes
from mcp.shared._httpx_utils import next_request_within_origin  # the SDK's own rule for its flow's redirects
from mcp.shared.auth import (
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthMetadata,
    OAuthToken,
    ProtectedResourceMetadata,
)

from ..secrets import mask_url
from ..secrets.known import remember_all
from . import oauth_challenge, oauth_client, signin
from .oauth_guard import Destinations, check_endpoint, is_loopback
from .signin import EXPIRY_MARGIN, Vault

log = logging.getLogger("sidecar.mcp_host")

CLIENT_NAME = "Covalt"
_OWN_REDIRECT_LIMIT = 5  # as the SDK's `_AUTH_REDIRECT_LIMIT`


class NeedsUser(Exception):
    """A connection got a 401 that only the user can answer (no tokens, or they can't be refreshed)."""


class Storage:
    """The SDK's `TokenStorage` over one secret-store record (see `signin.py`).

    Besides what the SDK stores: ``preRegistered`` (the user's client, `oauth_client.py`),
    ``challenge`` (what the server's last 401/403 asked for, `oauth_challenge.py`) and ``stepUps``
    (sign-ins in a row that answered a 403 insufficient_scope)."""

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
        pre = self.pre or {}
        remember_all(str(v) for v in (tokens.get("access_token"), tokens.get("refresh_token"),
                                       client.get("client_secret"), pre.get("clientSecret"),
                                       pre.get("privateKey")) if v)

    @property
    def pre(self) -> dict[str, Any] | None:
        """The user's pre-registered client (``OAuthClient`` on the wire), if one was given."""
        pre = self.record.get("preRegistered")
        return pre if isinstance(pre, dict) and pre.get("clientId") else None

    @property
    def grant(self) -> str:
        return str((self.pre or {}).get("grant") or "authorization_code")

    async def use_client(self, client: dict[str, Any]) -> None:
        """Keep the client the user entered; it replaces any registration and its tokens."""
        self.record = {"url": self.url, "preRegistered": client}
        await self._save()

    async def keep_challenge(self, response: httpx2.Response) -> None:
        oauth_challenge.keep(self.record, response)
        await self._save()

    async def signed_in(self, step_up: bool) -> None:
        """A sign-in got its tokens: the challenge it answered is done."""
        self.record.pop("challenge", None)
        self.record["stepUps"] = int(self.record.get("stepUps") or 0) + 1 if step_up else 0
        await self._save()

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
        if self.pre is not None:
            return oauth_client.client_info(self.pre, self.redirect_uri, self.metadata)
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
    """Tokens count as expired `EXPIRY_MARGIN` early, so they are refreshed before a request fails.
    A pre-registered client with a private key signs every token request (`oauth_client.py`)."""

    pre: dict[str, Any] | None = None

    def prepare_token_auth(self, data: dict[str, str],
                           headers: dict[str, str] | None = None) -> tuple[dict[str, str], dict[str, str]]:
        info, pre = self.client_info, self.pre
        if info is not None and info.token_endpoint_auth_method == "private_key_jwt" and pre is not None:
            if not pre.get("privateKey") or self.oauth_metadata is None:
                raise OAuthFlowError("private_key_jwt needs the client's private key and the authorization "
                                     "server's metadata (its issuer is the assertion's audience)")
            return oauth_client.add_assertion(pre, str(self.oauth_metadata.issuer), data), headers or {}
        return super().prepare_token_auth(data, headers)

    def update_token_expiry(self, token: OAuthToken) -> None:
        self.token_expiry_time = (time.time() + int(token.expires_in) - _margin(int(token.expires_in))
                                  if token.expires_in else None)


def _margin(lifetime: float) -> float:
    return min(EXPIRY_MARGIN, lifetime / 2)


class Provider(OAuthClientProvider):
    """The SDK's provider with our storage, early refresh, refresh on a 401, and endpoint checks."""

    def __init__(self, *, storage: Storage, interactive: bool, http_timeout: float,
                 on_needs_user: Callable[[str], None] | None = None, **kwargs: Any) -> None:
        super().__init__(storage=storage, **kwargs)
        self.context = _Context(**{f.name: getattr(self.context, f.name) for f in dataclasses.fields(OAuthContext)},
                                pre=storage.pre)
        self.store = storage
        self.machine = storage.grant == "client_credentials"
        """A client-credentials client: it gets its tokens without the user, a connection too."""
        self._step_up = False
        self._legacy_issuer: str | None = None
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
        if metadata is not None and self._legacy_issuer is not None:
            metadata.issuer = self._legacy_issuer  # type: ignore[assignment]  # see _legacy_metadata
            self._legacy_issuer = None
        self.store.note_discovery(self.context)
        if metadata is not None:
            check_endpoint("authorization", str(metadata.authorization_endpoint))
            check_endpoint("token", str(metadata.token_endpoint))
            check_endpoint("registration", str(metadata.registration_endpoint)
                           if metadata.registration_endpoint else None)
        pre = self.store.pre
        if pre is not None:  # its auth method may follow what the metadata found now lists
            redirects = self.context.client_metadata.redirect_uris
            self.context.client_info = oauth_client.client_info(pre, str(redirects[0]) if redirects else None,
                                                                metadata)
        if self._may_refresh and self.context.can_refresh_token():
            # A 401 with tokens in hand: the access token was revoked or expired early. One refresh
            # before the user is asked (the SDK would go straight to the browser).
            self._may_refresh, self.refreshing = False, True
            return await self._refresh_token()
        if self.machine and pre is not None:
            return oauth_client.client_credentials_request(self.context, pre, self._get_token_endpoint())
        if not self.interactive:
            raise self._needs_user("this server needs you to sign in (mcpServers/login)")
        kept = self.store.record.get("challenge") or {}
        if kept.get("status") == 403:
            # A step-up keeps what was granted and adds what the server named (SEP-2350), also when
            # this sign-in began with a plain 401 (the stored tokens are not sent in a new sign-in).
            granted = str((self.store.record.get("tokens") or {}).get("scope") or "") or None
            wanted = oauth_challenge.field(str(kept.get("header") or ""), "scope")
            self.context.client_metadata.scope = union_scopes(union_scopes(self.context.client_metadata.scope,
                                                                           granted), wanted)
        return await super()._perform_authorization()

    async def _handle_token_response(self, response: httpx2.Response) -> None:
        if response.status_code in (200, 201):
            oauth_client.check_token_resource(await response.aread(), self.context.get_resource_url())
        if self.refreshing:
            self.refreshing = False
            if not await self._handle_refresh_response(response):
                raise self._needs_user("the sign-in has expired or was revoked; sign in again (mcpServers/login)")
            return
        await super()._handle_token_response(response)
        if self.interactive:
            await self.store.signed_in(self._step_up)

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
            first = True
            while True:
                if outgoing is request:
                    response = yield outgoing
                    response = await self._challenged(request, response, first)
                    first = False
                else:
                    # The flow's own requests (discovery, registration, token) go where the server
                    # and its metadata point, so not through the connection's client, whose
                    # transport would look the name up again after the check: through one that
                    # connects only to the addresses it checked.
                    own = own or httpx2.AsyncClient(transport=self._destinations.transport(),
                                                    follow_redirects=False)
                    response = await self._legacy_metadata(outgoing, await self._send_own(own, outgoing))
                outgoing = await flow.asend(response)
        except StopAsyncIteration:
            return
        finally:
            await flow.aclose()
            if own is not None:
                await own.aclose()

    async def _challenged(self, request: httpx2.Request, response: httpx2.Response, first: bool) -> httpx2.Response:
        """The answer the SDK's flow gets for the MCP request itself (see `oauth_challenge.py`)."""
        step_up = oauth_challenge.is_step_up(response)
        if response.status_code == 401 or step_up:
            oauth_challenge.check(response)
        if not self.interactive and not self.machine and (
                step_up or (response.status_code == 401 and not self.context.can_refresh_token())):
            await self.store.keep_challenge(response)
            raise self._needs_user("this server asks for more permissions (scope "
                                   f"{oauth_challenge.field(response.headers.get('www-authenticate'), 'scope')}); "
                                   "sign in again (mcpServers/login)" if step_up
                                   else "this server needs you to sign in (mcpServers/login)")
        if self.interactive and first:
            if response.status_code not in (401, 403) and (kept := oauth_challenge.replay(self.store.record, request)):
                # The live answer is not used (it may be an endless event stream): closed, and
                # marked read, as httpx reads every answer its auth flow has passed over.
                await response.aclose()
                response._content = b""  # noqa: SLF001
                response, step_up = kept, oauth_challenge.is_step_up(kept)
                oauth_challenge.check(response)
            if step_up:
                oauth_challenge.check_step_up(self.store.record, response)
            self._step_up = step_up or (self.store.record.get("challenge") or {}).get("status") == 403
        return response

    async def _legacy_metadata(self, outgoing: httpx2.Request, response: httpx2.Response) -> httpx2.Response:
        """A 2025-03-26 server (no protected resource metadata) is its own authorization server, found
        at its origin's root metadata, which may name an issuer with a path on that same origin
        (``http://host/oauth``). RFC 8414 §3.3 would discard it, and the SDK does; the spec of that
        version did not ask for the match, and the same origin is the same party. So the flow is
        shown the origin as the issuer, and the real one is restored for the authorization
        response's ``iss`` and assertions (`_perform_authorization`). Another origin stays refused."""
        parts = urlsplit(self.context.server_url)
        origin = f"{parts.scheme}://{parts.netloc}"
        if (self.context.auth_server_url is not None or response.status_code != 200 or str(outgoing.url) not in (
                f"{origin}/.well-known/oauth-authorization-server", f"{origin}/.well-known/openid-configuration")):
            return response
        try:
            data = json.loads(await response.aread())
        except ValueError:
            return response
        issuer = data.get("issuer") if isinstance(data, dict) else None
        if not isinstance(issuer, str) or issuer.rstrip("/") == origin:
            return response
        found = urlsplit(issuer)
        if (found.scheme, found.netloc) != (parts.scheme, parts.netloc):
            return response
        self._legacy_issuer = issuer
        return httpx2.Response(200, json={**data, "issuer": origin}, request=outgoing)

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


def client_metadata(redirect_uri: str | None) -> OAuthClientMetadata:
    """What dynamic registration and a client ID metadata document say of us (None: a machine
    client, which has no redirect)."""
    if redirect_uri is None:
        return OAuthClientMetadata(redirect_uris=None, grant_types=["client_credentials"])
    return OAuthClientMetadata.model_validate({
        "client_name": CLIENT_NAME, "redirect_uris": [redirect_uri],
        "grant_types": ["authorization_code", "refresh_token"], "response_types": ["code"],
        "token_endpoint_auth_method": "none"})


async def connection_auth(vault: Vault, key: str, url: str, *, client_metadata_url: str | None,
                          http_timeout: float, on_needs_user: Callable[[str], None]) -> Provider:
    """The auth of a connection: the stored tokens, refreshed as needed; never the browser.
    `on_needs_user(reason)` is told (and the request fails) when only a sign-in would help."""
    storage = Storage(vault, key, url, None)
    await storage.load()
    stored = await storage.get_client_info()
    redirect = str(stored.redirect_uris[0]) if stored is not None and stored.redirect_uris \
        else "http://127.0.0.1/callback"
    if storage.grant == "client_credentials":
        redirect = None
    return Provider(storage=storage, interactive=False, http_timeout=http_timeout, on_needs_user=on_needs_user,
                    server_url=url,
                    client_metadata=client_metadata(redirect), client_metadata_url=client_metadata_url)



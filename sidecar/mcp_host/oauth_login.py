"""``mcpServers/login``: the sign-in to a remote MCP server, from the server's own challenge.

The sign-in starts from the request a connection makes first, MCP's ``initialize`` POST (a GET for
a legacy SSE server): a server that serves MCP only on POST answers a GET with 404 or 405, which says
nothing about signing in. When that request needs no token (a server that guards only some
methods), the challenge the connection met and kept is answered instead (`oauth_challenge.py`).

The browser step: discover, register (or use the client ID metadata document or the user's
pre-registered client), send the user to the authorization page through the UI, take the one
callback on the loopback listener, exchange the code; the tokens go to the secret store. A
pre-registered machine client (``grant: client_credentials``) needs no browser: its token comes
from the token endpoint directly.

Import lazily, with `oauth.py` (the SDK and httpx2).
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx2
from mcp.client.auth import OAuthFlowError, OAuthRegistrationError, OAuthTokenError
from mcp.shared.auth import AuthorizationCodeResult
from mcp_types import LATEST_PROTOCOL_VERSION

from ..errors import SidecarError, SignInFailed
from ..secrets import clean, mask_url
from . import loopback, signin
from .failures import flatten
from .oauth import CLIENT_NAME, Provider, Storage, client_metadata
from .oauth_guard import check_endpoint
from .signin import OpenUrl, Vault

log = logging.getLogger("sidecar.mcp_host")

_INITIALIZE = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
               "params": {"protocolVersion": LATEST_PROTOCOL_VERSION, "capabilities": {},
                          "clientInfo": {"name": CLIENT_NAME, "version": "1"}}}


async def _probe(client: httpx2.AsyncClient, provider: Provider, url: str, kind: str) -> int:
    """The first request of a connection; its status once the sign-in (if one was needed) is done."""
    if kind == "sse":
        async with client.stream("GET", url, headers={"Accept": "text/event-stream"}) as response:
            return response.status_code
    async with client.stream("POST", url, json=_INITIALIZE,
                             headers={"Accept": "application/json, text/event-stream"}) as response:
        status, session = response.status_code, response.headers.get("mcp-session-id")
    if session and status < 400:
        # End the session this probe opened (the connection opens its own). Without the provider:
        # whatever the server answers here must not start a second sign-in.
        tokens = provider.context.current_tokens
        auth = {"Authorization": f"Bearer {tokens.access_token}"} if tokens else {}
        try:
            await client.request("DELETE", url, headers={"mcp-session-id": session, **auth}, auth=None)
        except httpx2.HTTPError:
            pass
    return status


async def sign_in(vault: Vault, key: str, url: str, headers: dict[str, str], *, open_url: OpenUrl,
                  client_metadata_url: str | None, http_timeout: float, kind: str,
                  client: dict[str, Any] | None = None, wait: float = signin.SIGN_IN_TIMEOUT) -> None:
    """Sign in to one server (see the module); `client` is a pre-registered client the user entered
    (``OAuthClient`` on the wire), kept with the sign-in.

    Raises:
        SignInFailed: with what went wrong, for the user.
    """
    storage = Storage(vault, key, url, None)
    await storage.load()
    if client is not None:
        await storage.use_client(client)
    if storage.grant == "client_credentials":
        await _machine_sign_in(storage, url, headers, http_timeout=http_timeout, kind=kind)
        return
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
            await _run(provider, url, headers, http_timeout=http_timeout, kind=kind)
    except BaseException as exc:
        failure = _failure(key, exc, http_timeout)
        if failure is exc:
            raise
        raise failure from None


async def _machine_sign_in(storage: Storage, url: str, headers: dict[str, str], *, http_timeout: float,
                           kind: str) -> None:
    """A client-credentials client: the token endpoint gives the token, no browser is involved."""
    provider = Provider(storage=storage, interactive=True, http_timeout=http_timeout, server_url=url,
                        client_metadata=client_metadata(None))
    try:
        await _run(provider, url, headers, http_timeout=http_timeout, kind=kind)
    except BaseException as exc:
        failure = _failure(storage.key, exc, http_timeout)
        if failure is exc:
            raise
        raise failure from None


async def _run(provider: Provider, url: str, headers: dict[str, str], *, http_timeout: float, kind: str) -> None:
    key = provider.store.key
    async with httpx2.AsyncClient(auth=provider, headers=headers, timeout=httpx2.Timeout(http_timeout)) as http:
        # The answer after the sign-in does not matter (a server may want more than this one
        # request), only that it is not another 401 or 403.
        status = await _probe(http, provider, url, kind)
    if status in (401, 403):
        raise SignInFailed("refused", f"the server still answers HTTP {status} after signing in", server=key)
    if not provider.context.current_tokens:
        log.info("MCP server %s: no sign-in was needed (%s answered %d)", key, kind, status)


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



"""Signing out of a remote MCP server: asking its authorization server to revoke the tokens.

Import lazily, with `oauth.py` (the SDK and httpx2).
"""

from __future__ import annotations

import logging

import httpx2
from mcp.client.auth import OAuthFlowError

from ..secrets import clean
from . import signin
from .oauth_guard import Destinations, check_endpoint
from .signin import Vault

log = logging.getLogger("sidecar.mcp_host")


async def revoke(vault: Vault, key: str, *, http_timeout: float) -> None:
    """Ask the authorization server to revoke a server's tokens (RFC 7009), where it has a revocation
    endpoint. Best effort: signing out is forgetting them, which the caller does whatever happens here."""
    record = await signin.load(vault, key)
    tokens, client = record.get("tokens") or {}, record.get("client") or {}
    if pre := record.get("preRegistered"):  # the user's own client: revoked as it authenticates
        client = {"client_id": pre.get("clientId"), "client_secret": pre.get("clientSecret"),
                  "token_endpoint_auth_method": pre.get("tokenEndpointAuthMethod")}
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


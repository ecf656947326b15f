"""The user's pre-registered OAuth client, and the checks on what a token endpoint hands back.

A pre-registered client (``mcpServers/login``'s ``client``, kept in the sign-in record as
``preRegistered``) replaces the client ID metadata document and dynamic registration. Its token
endpoint authentication is one of the four MCP names: ``none``, ``client_secret_basic``,
``client_secret_post`` (the SDK's `OAuthContext.prepare_token_auth` applies those) and
``private_key_jwt`` (RFC 7523: an assertion signed here with the SDK's `SignedJWTParameters`).
With ``grant: client_credentials`` the token request is the client-credentials grant (RFC 6749
§4.4), as the SDK's `ClientCredentialsOAuthProvider` and `PrivateKeyJWTOAuthProvider` build it,
made here so it goes through our provider's checked transport and storage.

A token answer that names another resource (an RFC 8707 ``resource`` member, or a JWT access
token whose URL audience is not this server) is refused: such a token would be sent to a server it
was not issued for.

Import lazily, with `oauth.py` (the SDK, httpx2, PyJWT).
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from typing import Any

import httpx2
from mcp.client.auth import OAuthTokenError
from mcp.client.auth.extensions.client_credentials import SignedJWTParameters
from mcp.client.auth.oauth2 import OAuthContext
from mcp.shared.auth import OAuthClientInformationFull, OAuthMetadata
from mcp.shared.auth_utils import check_resource_allowed

JWT_BEARER = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
_SECRET_METHODS = ("client_secret_basic", "client_secret_post")


def method_of(pre: dict[str, Any], metadata: OAuthMetadata | None) -> str:
    """The token endpoint auth method of a pre-registered client: the user's, else what its
    credentials allow, preferring what the authorization server lists."""
    if pre.get("tokenEndpointAuthMethod"):
        return str(pre["tokenEndpointAuthMethod"])
    if pre.get("privateKey"):
        return "private_key_jwt"
    if not pre.get("clientSecret"):
        return "none"
    listed = (metadata.token_endpoint_auth_methods_supported if metadata is not None else None) or []
    return next((m for m in listed if m in _SECRET_METHODS), "client_secret_basic")


def client_info(pre: dict[str, Any], redirect_uri: str | None,
                metadata: OAuthMetadata | None) -> OAuthClientInformationFull:
    grant = str(pre.get("grant") or "authorization_code")
    return OAuthClientInformationFull.model_validate({
        "client_id": pre["clientId"], "client_secret": pre.get("clientSecret"),
        "token_endpoint_auth_method": method_of(pre, metadata),
        "redirect_uris": [redirect_uri] if redirect_uri and grant == "authorization_code" else None,
        "grant_types": [grant, "refresh_token"] if grant == "authorization_code" else [grant]})


def _algorithm(pre: dict[str, Any]) -> str:
    if pre.get("signingAlgorithm"):
        return str(pre["signingAlgorithm"])
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    key = load_pem_private_key(str(pre["privateKey"]).encode(), password=None)
    if isinstance(key, ec.EllipticCurvePrivateKey):
        return {"secp384r1": "ES384", "secp521r1": "ES512"}.get(key.curve.name, "ES256")
    return "RS256"


def add_assertion(pre: dict[str, Any], audience: str, data: dict[str, str]) -> dict[str, str]:
    """RFC 7523 client authentication: an assertion signed with the client's key for `audience`
    (the authorization server's issuer), made by the SDK's `SignedJWTParameters`."""
    import jwt  # PyJWT, which the SDK's extension uses too

    params = SignedJWTParameters(issuer=str(pre["clientId"]), subject=str(pre["clientId"]),
                                 signing_key=str(pre["privateKey"]), signing_algorithm=_algorithm(pre))
    now = int(time.time())
    claims = {"iss": params.issuer, "sub": params.subject, "aud": audience, "iat": now,
              "exp": now + params.lifetime_seconds, "jti": str(uuid.uuid4())}
    return {**data, "client_id": str(pre["clientId"]), "client_assertion_type": JWT_BEARER,
            "client_assertion": jwt.encode(claims, params.signing_key, algorithm=params.signing_algorithm)}


def client_credentials_request(context: OAuthContext, pre: dict[str, Any], token_url: str) -> httpx2.Request:
    """The client-credentials token request (RFC 6749 §4.4) of a pre-registered machine client;
    `context.prepare_token_auth` authenticates it."""
    data: dict[str, str] = {"grant_type": "client_credentials"}
    if context.should_include_resource_param(context.protocol_version):
        data["resource"] = context.get_resource_url()  # RFC 8707
    scope = pre.get("scope") or context.client_metadata.scope
    if scope:
        data["scope"] = str(scope)
    data, headers = context.prepare_token_auth(data, {"Content-Type": "application/x-www-form-urlencoded"})
    return httpx2.Request("POST", token_url, data=data, headers=headers)


def _jwt_audiences(token: str) -> list[str]:
    parts = token.split(".")
    if len(parts) != 3 or len(parts[1]) > 64 * 1024:
        return []
    try:
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except ValueError:
        return []
    aud = claims.get("aud") if isinstance(claims, dict) else None
    return [aud] if isinstance(aud, str) else [a for a in aud if isinstance(a, str)] if isinstance(aud, list) else []


def check_token_resource(body: bytes, resource: str) -> None:
    """Refuse a token answer issued for another resource than `resource` (see the module)."""
    try:
        answer = json.loads(body)
    except ValueError:
        return  # the SDK says what is wrong with it
    if not isinstance(answer, dict):
        return
    named, token = answer.get("resource"), answer.get("access_token")
    # An audience that is no URL (a client id, an API name) says nothing about this server; of URL
    # audiences one must be this server (or a parent of its URL).
    audiences = [a for a in (_jwt_audiences(token) if isinstance(token, str) else [])
                 if a.startswith(("https://", "http://"))]
    for urls in ([named] if isinstance(named, str) else [], audiences):
        if urls and not any(check_resource_allowed(requested_resource=resource, configured_resource=u) for u in urls):
            raise OAuthTokenError(f"the authorization server issued a token for another resource ({urls[0][:200]}), "
                                  f"not for this server ({resource}); it was not used")

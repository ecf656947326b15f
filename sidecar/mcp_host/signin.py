"""What the sidecar keeps of an MCP server's OAuth sign-in, and the words for its outcomes.

The SDK's client auth (`oauth.py`, imported with the SDK) does the protocol; this module holds the
parts that must not import it: where the sign-in lives in the secret store, and forgetting it.
A failed sign-in raises `errors.SignInFailed`.

One internal secret-store entry per server, ``mcp-oauth:<toolset~server>`` (lower case and ``:``:
never one of the user's ``${VAR}`` names, and apart from the HTTP tools' ``oauth:`` entries), a
JSON object: the server URL it was got for, the authorization server's issuer and metadata, the
client registration (dynamic registration or a client ID metadata document URL) and the tokens with
when they expire. A record for another URL is not used (the server was pointed elsewhere); the SDK
drops a client registration bound to another issuer. Nothing of it reaches the database, a log
line or a response.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import InvalidParams

if TYPE_CHECKING:
    from ..api.mcp import OAuthClient

log = logging.getLogger("sidecar.mcp_host")

PREFIX = "mcp-oauth:"
SIGN_IN_TIMEOUT = 300.0  # seconds the user has to finish signing in in the browser
EXPIRY_MARGIN = 60.0  # seconds before expiry an access token is refreshed

OpenUrl = Callable[[str, str, str], Awaitable[bool]]
"""``(server key, url, reason) -> opened``: the UI opens the sign-in page (``ui/openUrl``)."""


class Vault(Protocol):
    """What sign-ins need of the secret store."""

    async def get(self, name: str) -> str | None: ...
    async def set(self, name: str, value: str) -> None: ...
    async def delete(self, name: str) -> bool: ...
    async def names(self) -> list[str]: ...


def record_name(key: str) -> str:
    return f"{PREFIX}{key}"


async def load(vault: Vault, key: str) -> dict[str, Any]:
    raw = await vault.get(record_name(key))
    if not raw:
        return {}
    try:
        record = json.loads(raw)
    except ValueError:
        log.warning("MCP server %s: its stored sign-in is unreadable; it needs a new one", key)
        return {}
    return record if isinstance(record, dict) else {}


async def save(vault: Vault, key: str, record: dict[str, Any]) -> None:
    await vault.set(record_name(key), json.dumps(record, separators=(",", ":")))


async def forget(vault: Vault, key: str) -> bool:
    """Sign a server out: its tokens and client registration leave the store."""
    return await vault.delete(record_name(key))


async def forget_toolset(vault: Vault, toolset_id: str) -> None:
    """An uninstalled toolset's servers' sign-ins leave the store."""
    prefix = record_name(f"{toolset_id}~")
    for name in await vault.names():
        if name.startswith(prefix):
            await vault.delete(name)


def check_client(client: OAuthClient) -> None:
    """Refuse a pre-registered client that could not sign in, saying which field to fix (never
    quoting the secret or the key)."""
    method, secret, key = client.token_endpoint_auth_method, client.client_secret, client.private_key
    if client.grant == "client_credentials" and not (secret or key):
        raise InvalidParams("params.client", "a client_credentials client authenticates itself: give "
                                             "clientSecret or privateKey")
    if method == "private_key_jwt" and not key:
        raise InvalidParams("params.client.privateKey", "private_key_jwt signs with a private key: give privateKey")
    if method in ("client_secret_basic", "client_secret_post") and not secret:
        raise InvalidParams("params.client.clientSecret", f"{method} sends the client secret: give clientSecret")
    if key and method not in (None, "private_key_jwt"):
        raise InvalidParams("params.client.tokenEndpointAuthMethod",
                            "a privateKey is used with private_key_jwt only; leave the method out or name that one")
    if key:
        from cryptography.hazmat.primitives.serialization import load_pem_private_key

        try:
            load_pem_private_key(key.encode(), password=None)
        except (ValueError, TypeError):
            raise InvalidParams("params.client.privateKey", "not an unencrypted PEM private key "
                                                            "(-----BEGIN PRIVATE KEY----- ...)") from None

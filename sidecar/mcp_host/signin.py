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
from typing import Any, Protocol

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

"""An MCP server's OAuth tokens are scrubbed from logs and errors one by one, not only as the
whole stored record (a server may repeat its bearer token in a log line or on stderr)."""

from __future__ import annotations

import json

import pytest

from sidecar.mcp_host import signin
from sidecar.secrets.known import scrub_known

pytestmark = pytest.mark.anyio


class _Vault:
    def __init__(self) -> None:
        self.values: dict[str, str] = {}

    async def get(self, name: str) -> str | None:
        return self.values.get(name)

    async def set(self, name: str, value: str) -> None:
        self.values[name] = value

    async def delete(self, name: str) -> bool:
        return self.values.pop(name, None) is not None

    async def names(self) -> list[str]:
        return list(self.values)


async def test_tokens_read_back_from_the_store_are_scrubbed_from_text():
    from sidecar.mcp_host.oauth import Storage  # (loads the mcp SDK)

    vault = _Vault()
    url = "https://mcp.example.com/mcp"
    record = {"url": url, "tokens": {"access_token": "at-7Hq2xLw9Zr4Kp8Vd", "token_type": "Bearer",
                                     "refresh_token": "rt-3Jm6Ny1Bc5Xf0Gs2"},
              "client": {"client_id": "c1", "client_secret": "cs-9Tk4Wp7Ra2Qe6Lu1", "redirect_uris": []}}
    await vault.set(signin.record_name("ts~srv"), json.dumps(record))
    await Storage(vault, "ts~srv", url, None).load()
    line = "server said: Authorization: Bearer at-7Hq2xLw9Zr4Kp8Vd, refresh rt-3Jm6Ny1Bc5Xf0Gs2, cs-9Tk4Wp7Ra2Qe6Lu1"
    cleaned = scrub_known(line)
    assert "at-7Hq2xLw9Zr4Kp8Vd" not in cleaned and "rt-3Jm6Ny1Bc5Xf0Gs2" not in cleaned
    assert "cs-9Tk4Wp7Ra2Qe6Lu1" not in cleaned and cleaned.startswith("server said:")

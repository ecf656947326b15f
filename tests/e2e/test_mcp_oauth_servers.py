"""OAuth sign-ins against servers that do not behave like our first fixture: one that serves MCP only on
POST, a pre-registered client the user enters, and the bad input of issue 29 (a 10 KB scope list, a
token for another resource). The servers are tests/fixtures/mcp/oauth_server.py with flags; the UI
is scripted as in test_mcp_oauth.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx2
import pytest

from sidecar.client import RemoteError, SidecarClient
from tests.e2e.test_mcp_oauth import KEY, Browser, add_remote, echo, oauth_servers, status, stored
from tests.timing import scaled

pytestmark = pytest.mark.anyio


async def test_a_server_that_refuses_get_still_gets_signed_in(app: SidecarClient) -> None:
    # The sign-in probed with a GET; this server answers 405 to it, before any auth, as servers
    # serving MCP only on POST do, and the sidecar concluded no sign-in was needed.
    async with oauth_servers("--post-only") as servers:
        browser = Browser()
        app.handle("ui/openUrl", browser)
        await add_remote(app, servers)
        assert (await status(app, "needsAuth", "connected", "error"))["status"] == "needsAuth"
        server = (await app.request("mcpServers/login", {"id": KEY}, timeout=60))["server"]
        assert server["status"] == "connected", server
        assert len(browser.opened) == 1 and browser.landed == [200]
        assert (await echo(app, "posted"))["result"]["content"][0]["text"] == "posted"


async def test_a_pre_registered_client_signs_in_and_its_secret_is_never_shown(app: SidecarClient,
                                                                             data_dir: Path) -> None:
    async with oauth_servers() as servers:
        async with httpx2.AsyncClient() as http:  # the user registered this client ahead of time
            registered = (await http.post(f"http://127.0.0.1:{servers.as_port}/register", json={
                "redirect_uris": ["http://127.0.0.1/callback"], "token_endpoint_auth_method": "client_secret_post",
                "grant_types": ["authorization_code", "refresh_token"], "response_types": ["code"]})).json()
        client_id, secret = registered["client_id"], registered["client_secret"]
        browser = Browser()
        app.handle("ui/openUrl", browser)
        await add_remote(app, servers)
        await status(app, "needsAuth")
        server = (await app.request("mcpServers/login", {"id": KEY, "client": {
            "clientId": client_id, "clientSecret": secret, "tokenEndpointAuthMethod": "client_secret_post"}},
            timeout=60))["server"]
        assert server["status"] == "connected", server
        assert parse_qs(urlsplit(browser.opened[0]["url"]).query)["client_id"] == [client_id]
        stats = await servers.stats()
        assert stats["registrations"] == 1 and stats["tokens"] == 1  # only the user's own registration
        assert (await echo(app, "pre-registered"))["status"] == "success"

        record = stored(data_dir)
        assert record is not None and record["preRegistered"]["clientSecret"] == secret
        assert secret.encode() not in (data_dir / "sidecar.db").read_bytes()
        assert secret not in json.dumps(await app.request("mcpServers/list"))
        assert secret not in json.dumps(server)


@pytest.mark.parametrize(("client", "path"), [
    ({"clientId": "m2m", "grant": "client_credentials"}, "params.client"),
    ({"clientId": "c", "tokenEndpointAuthMethod": "private_key_jwt"}, "params.client.privateKey"),
    ({"clientId": "c", "tokenEndpointAuthMethod": "client_secret_basic"}, "params.client.clientSecret"),
    ({"clientId": "c", "privateKey": "not a key at all"}, "params.client.privateKey"),
])
async def test_a_client_that_cannot_sign_in_is_refused_before_anything_is_sent(
        app: SidecarClient, client: dict[str, str], path: str) -> None:
    async with oauth_servers() as servers:
        await add_remote(app, servers)
        await status(app, "needsAuth")
        with pytest.raises(RemoteError) as failed:
            await app.request("mcpServers/login", {"id": KEY, "client": client})
        assert failed.value.code == -32602 and failed.value.data["path"] == path, failed.value.message
        assert "not a key at all" not in failed.value.message
        assert (await servers.stats())["tokens"] == 0


async def test_a_challenge_with_kilobytes_of_scopes_is_refused_without_opening_a_page(
        app: SidecarClient, data_dir: Path) -> None:
    async with oauth_servers("--huge-scope") as servers:
        browser = Browser()
        app.handle("ui/openUrl", browser)
        await add_remote(app, servers)
        await status(app, "needsAuth", "error")
        with anyio.fail_after(scaled(30)), pytest.raises(RemoteError) as failed:
            await app.request("mcpServers/login", {"id": KEY}, timeout=30)
        assert failed.value.code == -32020 and "at most 4096 are answered" in failed.value.message
        assert browser.opened == [] and (await servers.stats())["codes"] == 0
        assert len(json.dumps((stored(data_dir) or {}).get("challenge") or {})) < 5000  # kept bounded too


async def test_a_token_issued_for_another_resource_is_refused_and_not_stored(app: SidecarClient,
                                                                            data_dir: Path) -> None:
    async with oauth_servers("--other-resource") as servers:
        app.handle("ui/openUrl", Browser())
        await add_remote(app, servers)
        await status(app, "needsAuth")
        with pytest.raises(RemoteError) as failed:
            await app.request("mcpServers/login", {"id": KEY}, timeout=60)
        assert failed.value.code == -32020, failed.value.message
        assert "another resource (https://elsewhere.example/mcp)" in failed.value.message
        assert (await servers.stats())["tokens"] == 1  # it was issued, and then not used
        assert not (stored(data_dir) or {}).get("tokens")
        assert (await status(app, "needsAuth", "connected", "error"))["status"] == "needsAuth"

"""OAuth for remote MCP servers, end to end: the sidecar against a local authorization server and a
protected MCP server built with the SDK's own server-side auth (tests/fixtures/mcp/oauth_server.py).

The UI side is scripted here: it answers ``ui/openUrl`` the way a browser would, by fetching the
authorization URL and following its redirect to the sidecar's loopback listener.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx2
import pytest

from sidecar.client import RemoteError, SidecarClient
from tests.procs import served
from tests.timing import scaled

pytestmark = pytest.mark.anyio

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "mcp" / "oauth_server.py"
KEY = "remote~remote"


@dataclass
class Servers:
    rs_port: int
    as_port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.rs_port}/mcp"

    async def stats(self) -> dict[str, Any]:
        async with httpx2.AsyncClient() as c:
            return (await c.get(f"http://127.0.0.1:{self.as_port}/stats")).json()

    async def expire_access_tokens(self) -> None:
        async with httpx2.AsyncClient() as c:
            (await c.post(f"http://127.0.0.1:{self.as_port}/expire")).raise_for_status()


@asynccontextmanager
async def oauth_servers(*flags: str) -> AsyncIterator[Servers]:
    async with served([sys.executable, str(FIXTURE), *flags]) as (_, rs, auth):
        yield Servers(int(rs), int(auth))


@dataclass
class Browser:
    """The UI's ``ui/openUrl``: fetch the page and follow its redirects (to the loopback callback)."""

    opened: list[dict[str, Any]] = field(default_factory=list)
    landed: list[int] = field(default_factory=list)
    answer: bool = True

    async def __call__(self, params: dict[str, Any]) -> dict[str, Any]:
        self.opened.append(params)
        if self.answer:
            async with httpx2.AsyncClient(follow_redirects=True, timeout=10) as c:
                self.landed.append((await c.get(params["url"])).status_code)
        return {"opened": self.answer}


def no_browser(params: dict[str, Any]) -> dict[str, Any]:
    raise AssertionError(f"the sidecar opened a browser on its own: {params}")


async def add_remote(sc: SidecarClient, servers: Servers, **extra: Any) -> dict[str, Any]:
    params = {"id": "remote", "type": "streamable-http", "url": servers.url} | extra
    return (await sc.request("mcpServers/add", params))["server"]


async def status(sc: SidecarClient, *wanted: str, timeout: float = 30) -> dict[str, Any]:
    async def current() -> dict[str, Any]:
        return next(s for s in (await sc.request("mcpServers/list"))["servers"] if s["id"] == KEY)

    with anyio.move_on_after(scaled(timeout)):
        while (server := await current())["status"] not in wanted:
            await anyio.sleep(0.05)
        return server
    pytest.fail(f"{KEY} never became {wanted}: {await current()}")


def stored(data_dir: Path) -> dict[str, Any] | None:
    """The server's sign-in record in the secret store's file backend."""
    path = data_dir / "secrets.json"
    if not path.exists():
        return None
    raw = json.loads(path.read_text())["secrets"].get(f"mcp-oauth:{KEY}")
    return json.loads(raw) if raw else None


async def echo(sc: SidecarClient, text: str) -> dict[str, Any]:
    return (await sc.request("tools/call", {"toolId": f"mcp:{KEY}:echo", "args": {"text": text}}, timeout=60))[
        "toolCall"]


async def test_sign_in_through_the_ui_connects_and_the_tokens_stay_in_the_secret_store(data_dir: Path) -> None:
    async with oauth_servers() as servers, SidecarClient.spawn(
            data_dir, args=("--secrets-backend", "file", "--log-level", "debug")) as sc:
        browser = Browser()
        sc.handle("ui/openUrl", browser)
        await add_remote(sc, servers)
        waiting = await status(sc, "needsAuth", "connected", "error")
        assert waiting["status"] == "needsAuth", waiting
        assert "sign in" in waiting["error"] and "mcpServers/login" in waiting["error"]
        assert browser.opened == []  # connecting never opens a browser by itself

        server = (await sc.request("mcpServers/login", {"id": KEY}, timeout=60))["server"]
        assert server["status"] == "connected", server
        assert server["toolCount"] == 1
        assert len(browser.opened) == 1 and browser.landed == [200]
        page = browser.opened[0]
        assert page["server"] == KEY and KEY in page["reason"]
        query = parse_qs(urlsplit(page["url"]).query)
        assert urlsplit(page["url"]).netloc == f"127.0.0.1:{servers.as_port}"
        assert query["code_challenge_method"] == ["S256"] and query["code_challenge"][0]
        assert query["resource"] == [servers.url]  # RFC 8707: the token is for this server
        redirect = urlsplit(query["redirect_uri"][0])
        assert redirect.hostname == "127.0.0.1" and redirect.path == "/callback"
        stats = await servers.stats()
        assert stats["registrations"] == 1 and stats["tokens"] == 1 and stats["resource"] == servers.url

        done = await echo(sc, "through oauth")
        assert done["status"] == "success", done
        assert done["result"]["content"][0]["text"] == "through oauth"

        record = stored(data_dir)
        assert record is not None and record["issuer"].startswith(f"http://127.0.0.1:{servers.as_port}")
        token = record["tokens"]["access_token"]
        refresh = record["tokens"]["refresh_token"]
        assert token.encode() not in (data_dir / "sidecar.db").read_bytes()
        listed = await sc.request("secrets/list")
        assert all(not s["name"].startswith("mcp-oauth") for s in listed["secrets"])
        listed_servers = json.dumps(await sc.request("mcpServers/list"))
        assert token not in listed_servers and refresh not in listed_servers
    assert token not in sc.stderr_text() and refresh not in sc.stderr_text()


async def test_a_client_id_metadata_document_is_preferred_over_registration(data_dir: Path) -> None:
    cimd = "https://covalt.example/oauth/client.json"
    async with oauth_servers("--cimd") as servers, SidecarClient.in_process(
            data_dir, secrets_backend="file", oauth_client_metadata_url=cimd) as sc:
        browser = Browser()
        sc.handle("ui/openUrl", browser)
        await add_remote(sc, servers)
        await status(sc, "needsAuth")
        assert (await sc.request("mcpServers/login", {"id": KEY}, timeout=60))["server"]["status"] == "connected"
        assert parse_qs(urlsplit(browser.opened[0]["url"]).query)["client_id"] == [cimd]
        stats = await servers.stats()
        assert stats["registrations"] == 0 and stats["tokens"] == 1


async def test_a_legacy_sse_server_signs_in_the_same_way(app: SidecarClient) -> None:
    async with oauth_servers("--sse") as servers:
        browser = Browser()
        app.handle("ui/openUrl", browser)
        url = f"http://127.0.0.1:{servers.rs_port}/sse"
        await app.request("mcpServers/add", {"id": "remote", "type": "sse", "url": url})
        assert (await status(app, "needsAuth", "connected", "error"))["status"] == "needsAuth"
        server = (await app.request("mcpServers/login", {"id": KEY}, timeout=60))["server"]
        assert server["status"] == "connected", server
        assert parse_qs(urlsplit(browser.opened[0]["url"]).query)["resource"] == [url]
        assert (await echo(app, "over sse"))["result"]["content"][0]["text"] == "over sse"


async def test_a_revoked_access_token_is_refreshed_without_the_user(app: SidecarClient) -> None:
    async with oauth_servers() as servers:
        app.handle("ui/openUrl", Browser())
        await add_remote(app, servers)
        await status(app, "needsAuth")
        assert (await app.request("mcpServers/login", {"id": KEY}, timeout=60))["server"]["status"] == "connected"
        app.handle("ui/openUrl", no_browser)

        await servers.expire_access_tokens()  # the next request gets a 401
        done = await echo(app, "after a 401")
        assert done["status"] == "success", done
        assert (await servers.stats())["refreshes"] == 1
        assert (await status(app, "connected", "needsAuth", "error"))["status"] == "connected"


async def test_tokens_outlive_a_restart_and_are_refreshed_before_they_expire(data_dir: Path) -> None:
    async with oauth_servers("--token-ttl", "2") as servers:
        async with SidecarClient.in_process(data_dir, secrets_backend="file") as sc:
            sc.handle("ui/openUrl", Browser())
            await add_remote(sc, servers)
            await status(sc, "needsAuth")
            assert (await sc.request("mcpServers/login", {"id": KEY}, timeout=60))["server"]["status"] == "connected"
        await anyio.sleep(2.5)  # the access token has expired meanwhile
        async with SidecarClient.in_process(data_dir, secrets_backend="file") as sc:
            sc.handle("ui/openUrl", no_browser)
            assert (await status(sc, "connected", "needsAuth", "error"))["status"] == "connected"
            assert (await echo(sc, "again"))["status"] == "success"
        stats = await servers.stats()
        assert stats["refreshes"] >= 1 and stats["tokens"] == 1 and stats["registrations"] == 1


async def test_logout_forgets_the_tokens_and_the_server_asks_for_a_sign_in_again(app: SidecarClient,
                                                                                 data_dir: Path) -> None:
    async with oauth_servers() as servers:
        app.handle("ui/openUrl", Browser())
        await add_remote(app, servers)
        await status(app, "needsAuth")
        await app.request("mcpServers/login", {"id": KEY}, timeout=60)
        assert stored(data_dir) is not None

        await app.request("mcpServers/logout", {"id": KEY})
        assert stored(data_dir) is None
        assert (await servers.stats())["revoked"] >= 1  # RFC 7009: the authorization server forgets them too
        assert (await status(app, "needsAuth", "error"))["status"] == "needsAuth"
        failed = await app.request_raw("tools/call", {"toolId": f"mcp:{KEY}:echo", "args": {"text": "x"}})
        assert "sign in" in json.dumps(failed)

        await app.request("mcpServers/login", {"id": KEY}, timeout=60)
        assert stored(data_dir) is not None
        await app.request("mcpServers/remove", {"id": KEY})  # removing the server forgets its sign-in too
        assert stored(data_dir) is None


@pytest.mark.parametrize(("flag", "code", "words"), [
    ("--wrong-state", -32020, "state that does not match"),
    ("--wrong-iss", -32020, "iss"),
    ("--http-endpoint", -32020, "not HTTPS"),
    ("--bad-redirect", -32020, "not this machine's loopback"),
    ("--hang-token", -32022, "did not answer within 2 s"),
])
async def test_a_misbehaving_authorization_server_fails_the_sign_in_and_stores_no_token(
        app: SidecarClient, data_dir: Path, flag: str, code: int, words: str) -> None:
    async with oauth_servers(flag) as servers:
        app.handle("ui/openUrl", Browser())
        await add_remote(app, servers, connectTimeout=2)
        await status(app, "needsAuth")
        with anyio.fail_after(scaled(30)), pytest.raises(RemoteError) as failed:
            await app.request("mcpServers/login", {"id": KEY}, timeout=30)
        assert failed.value.code == code, failed.value.message
        assert words in failed.value.message
        assert failed.value.data["source"] == "oauth" and failed.value.data["server"] == KEY
        assert not (stored(data_dir) or {}).get("tokens")
        assert (await status(app, "needsAuth", "connected", "error"))["status"] == "needsAuth"


async def test_a_ui_that_does_not_open_the_page_fails_the_sign_in(app: SidecarClient) -> None:
    async with oauth_servers() as servers:
        browser = Browser(answer=False)
        app.handle("ui/openUrl", browser)
        await add_remote(app, servers)
        await status(app, "needsAuth")
        with pytest.raises(RemoteError) as failed:
            await app.request("mcpServers/login", {"id": KEY}, timeout=30)
        assert "not opened" in failed.value.message and len(browser.opened) == 1


async def test_a_second_login_while_one_waits_for_the_browser_is_refused(app: SidecarClient) -> None:
    async with oauth_servers() as servers:
        opened = anyio.Event()
        release = anyio.Event()
        browser = Browser()

        async def slow_user(params: dict[str, Any]) -> dict[str, Any]:
            opened.set()
            await release.wait()
            return await browser(params)

        app.handle("ui/openUrl", slow_user)
        await add_remote(app, servers)
        await status(app, "needsAuth")
        results: list[Any] = []

        async def first() -> None:
            results.append(await app.request("mcpServers/login", {"id": KEY}, timeout=60))

        async with anyio.create_task_group() as tg:
            tg.start_soon(first)
            await opened.wait()
            with pytest.raises(RemoteError) as second:
                await app.request("mcpServers/login", {"id": KEY})
            release.set()
        assert second.value.code == -32011 and "already waiting" in second.value.message
        assert results[0]["server"]["status"] == "connected" and len(browser.opened) == 1


async def test_login_on_a_stdio_server_says_it_has_no_sign_in(app: SidecarClient) -> None:
    await app.request("mcpServers/add", {"id": "remote", "command": sys.executable,
                                         "args": [str(FIXTURE.parent / "basic.py")]})
    with pytest.raises(RemoteError) as failed:
        await app.request("mcpServers/login", {"id": KEY})
    assert failed.value.code == -32011 and "stdio" in failed.value.message

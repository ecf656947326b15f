"""secrets/* through the real sidecar: stored, listed masked, used by MCP servers and providers without
a restart, moved out of the database, and never shown: not in a response, a notification or the log."""

from __future__ import annotations

import json
import sqlite3
import stat
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from sidecar.client import RemoteError, SidecarClient
from sidecar.store.db import migrations
from tests.e2e.test_mcp import FIXTURES, call, status
from tests.keystore import SecretService, secret_service
from tests.providers.server import Reply, StreamServer, events

pytestmark = pytest.mark.anyio

SECRET = "ghp-e2e-Secret-Value-91x7Qm"
OTHER = "tok-second-secret-5Zp2"
PROVIDER_KEY = "sk-proj-migrated-Zq81vKx0c2Lm7Tn4"


class Seen:
    """Every message the sidecar sent, to grep for a value."""

    def __init__(self, sc: SidecarClient) -> None:
        self.messages: list[dict[str, Any]] = []
        sc.on_message = self.messages.append

    def text(self) -> str:
        return json.dumps(self.messages)


def files_text(root: Path) -> bytes:
    """Every file under `root`, as bytes (the database, its WAL, the secret index ...)."""
    return b"".join(p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file())


@pytest.fixture
def keystore(tmp_path: Path) -> Iterator[SecretService]:
    with secret_service(tmp_path / "secret-service") as service:
        yield service


@pytest.fixture
def provider_api() -> Iterator[StreamServer]:
    srv = StreamServer().start()
    yield srv
    srv.stop()


async def initialize(sc: SidecarClient) -> dict[str, Any]:
    return await sc.request("initialize", {"clientInfo": {"name": "test", "version": "0"}})


async def test_secrets_are_stored_listed_masked_and_deleted_in_the_0600_file(data_dir: Path):
    async with SidecarClient.spawn(data_dir, args=("--log-level", "debug"), initialize=False) as sc:
        seen = Seen(sc)
        first = await initialize(sc)
        assert "secretsBackend" not in first["capabilities"]  # nothing stored yet: not chosen yet
        assert await sc.request("secrets/set", {"name": "GITHUB_TOKEN", "value": SECRET + "\n"}) == {}
        await sc.request("secrets/set", {"name": "OTHER_TOKEN", "value": OTHER})
        await sc.request("mcpServers/add", {"id": "gh", "command": sys.executable, "args": [str(FIXTURES / "basic.py")],
                                            "env": {"GH": "${GITHUB_TOKEN}"}})
        await sc.request("providers/set", {"id": "p1", "kind": "openai", "apiKey": "${GITHUB_TOKEN}",
                                           "baseUrl": "https://api.example.test/v1"})
        listed = await sc.request("secrets/list")
        assert listed == {"backend": "file", "path": str(data_dir / "secrets.json"), "secrets": [
            {"name": "GITHUB_TOKEN", "masked": "****x7Qm", "usedBy": ["mcpServer:gh~gh", "provider:p1"]},
            {"name": "OTHER_TOKEN", "masked": "****5Zp2", "usedBy": []}]}
        assert (await sc.request("debug/info"))["secretsBackend"] == "file"
        assert await sc.request("secrets/delete", {"name": "OTHER_TOKEN"}) == {}
        with pytest.raises(RemoteError) as gone:
            await sc.request("secrets/delete", {"name": "OTHER_TOKEN"})
        assert gone.value.code == -32010
        await status(sc, "gh~gh", "connected")
        await sc.request("shutdown")
    assert SECRET not in seen.text() and OTHER not in seen.text()
    log = sc.stderr_text()
    assert "GITHUB_TOKEN" in log and SECRET not in log and OTHER not in log
    path = data_dir / "secrets.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert json.loads(path.read_text())["secrets"] == {"GITHUB_TOKEN": SECRET}  # the newline stripped
    assert SECRET.encode() not in files_text(data_dir).replace(path.read_bytes(), b"")

    async with SidecarClient.spawn(data_dir, initialize=False) as again:
        assert (await initialize(again))["capabilities"]["secretsBackend"] == "file"  # recorded
        assert [s["name"] for s in (await again.request("secrets/list"))["secrets"]] == ["GITHUB_TOKEN"]


@pytest.mark.parametrize(("params", "path", "words"), [
    ({"name": "github_token", "value": "x"}, "params.name", "upper-case letters"),
    ({"name": "1TOKEN", "value": "x"}, "params.name", "^[A-Z_][A-Z0-9_]{0,127}$"),
    ({"name": "T" * 129, "value": "x"}, "params.name", "1-128"),
    ({"name": "TOKEN\n", "value": "x"}, "params.name", "upper-case letters"),
    ({"name": "provider:openai", "value": "x"}, "params.name", "upper-case letters"),
    ({"name": "TOKEN", "value": " \n"}, "params.value", "secrets/delete"),
    ({"name": "TOKEN", "value": "a\x00b"}, "params.value", "NUL"),
    ({"name": "TOKEN", "value": "x" * 65537}, "params.value", "65536"),
])
async def test_bad_names_and_values_say_what_to_fix(app: SidecarClient, params: dict[str, str], path: str,
                                                    words: str):
    with pytest.raises(RemoteError) as bad:
        await app.request("secrets/set", params)
    assert bad.value.code == -32602 and bad.value.data["path"] == path and words in bad.value.message
    assert (await app.request("secrets/list"))["secrets"] == []


async def test_a_server_waiting_on_a_missing_secret_connects_once_it_is_set(sidecar: SidecarClient):
    await sidecar.request("mcpServers/add", {"id": "needs", "command": sys.executable,
                                             "args": [str(FIXTURES / "basic.py")], "env": {"TOKEN": "${NEEDED_TOKEN}"}})
    waiting = await status(sidecar, "needs~needs", "error")
    assert waiting["error"] == ("NEEDED_TOKEN is not set: store it as a secret (secrets/set, in the app's secret "
                                "settings) or set it in the environment the app starts from")
    await sidecar.request("secrets/set", {"name": "NEEDED_TOKEN", "value": SECRET})
    connected = await status(sidecar, "needs~needs", "connected", timeout=30)
    assert "error" not in connected
    done = await call(sidecar, "mcp:needs~needs:env", {"name": "TOKEN"})
    assert done["result"]["content"][0]["text"] == SECRET  # the server got the value (its own output says so)
    assert SECRET not in json.dumps(await sidecar.request("mcpServers/list"))
    await sidecar.request("shutdown")
    assert SECRET not in sidecar.stderr_text()


async def test_a_token_given_with_a_server_is_kept_in_the_store_and_the_server_refers_to_it(
        sidecar: SidecarClient, data_dir: Path):
    added = await sidecar.request("mcpServers/add", {
        "id": "keyed", "command": sys.executable, "args": [str(FIXTURES / "basic.py")],
        "env": {"API_KEY": SECRET, "LOG_LEVEL": "debug"}})
    assert added["server"]["id"] == "keyed~keyed"
    await status(sidecar, "keyed~keyed", "connected", timeout=30)
    got = await call(sidecar, "mcp:keyed~keyed:env", {"name": "API_KEY"})
    assert got["result"]["content"][0]["text"] == SECRET  # the server gets the value
    listed = await sidecar.request("secrets/list")
    assert {"name": "KEYED_API_KEY", "masked": "****x7Qm", "usedBy": ["mcpServer:keyed~keyed"]} in listed["secrets"]
    # Only the store's own file holds the value: not the database, its WAL, the toolset's manifest.
    held = [p.name for p in data_dir.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]
    assert held == ["secrets.json"]
    exported = await sidecar.request("toolsets/export", {"id": "keyed", "path": str(data_dir.parent / "k.zip")})
    assert SECRET.encode() not in Path(exported["path"]).read_bytes()
    # Harmless values stay as given; the secret is changed where the user changes secrets.
    got = await call(sidecar, "mcp:keyed~keyed:env", {"name": "LOG_LEVEL"})
    assert got["result"]["content"][0]["text"] == "debug"
    await sidecar.request("secrets/set", {"name": "KEYED_API_KEY", "value": OTHER})
    await sidecar.request("mcpServers/reconnect", {"id": "keyed~keyed"})
    await status(sidecar, "keyed~keyed", "connected", timeout=30)
    got = await call(sidecar, "mcp:keyed~keyed:env", {"name": "API_KEY"})
    assert got["result"]["content"][0]["text"] == OTHER


async def test_a_refused_server_leaves_no_secret_behind(sidecar: SidecarClient):
    params = {"id": "twice", "command": sys.executable, "args": [str(FIXTURES / "basic.py")],
              "env": {"API_TOKEN": SECRET}}
    await sidecar.request("mcpServers/add", params)
    with pytest.raises(RemoteError) as again:
        await sidecar.request("mcpServers/add", params | {"env": {"API_TOKEN": OTHER}})
    assert again.value.code == -32011
    with pytest.raises(RemoteError) as bad:
        await sidecar.request("mcpServers/add", {"id": "bad", "type": "stdio", "env": {"API_TOKEN": OTHER}})
    assert bad.value.code == -32602  # a stdio server needs a command
    assert [s["name"] for s in (await sidecar.request("secrets/list"))["secrets"]] == ["TWICE_API_TOKEN"]


def old_database(path: Path, rows: list[tuple[str, str, str | None, str | None]]) -> None:
    """A database as the previous schema (before the secret store) left it, providers and all."""
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path)
    steps = migrations()
    mine = next(i for i, (_, name, _) in enumerate(steps) if name.endswith("_provider_key_secret.sql"))
    for number, _, sql in steps[:mine]:
        db.executescript(sql)
        db.execute(f"PRAGMA user_version={number}")
    db.executemany("INSERT INTO providers (id, kind, base_url, api_key, config, updated_at) "
                   "VALUES (?, ?, ?, ?, '{}', '2026-11-01T00:00:00Z')", rows)
    db.commit()
    db.close()


async def test_plaintext_provider_keys_move_from_the_database_to_the_store(data_dir: Path,
                                                                          provider_api: StreamServer):
    old_database(data_dir / "sidecar.db", [
        ("old", "openai", provider_api.url + "/v1", PROVIDER_KEY),
        ("byref", "anthropic", None, "${ANTHROPIC_KEY_VAR}"),
    ])
    assert PROVIDER_KEY.encode() in files_text(data_dir)
    async with SidecarClient.spawn(data_dir) as sc:
        seen = Seen(sc)
        listed = {p["id"]: p for p in (await sc.request("providers/list"))["providers"]}
        assert listed["old"]["apiKey"] == "sk-…" + PROVIDER_KEY[-4:]
        assert listed["byref"]["apiKey"] == "${ANTHROPIC_KEY_VAR}"
        await sc.wait_for(lambda: PROVIDER_KEY.encode() not in (data_dir / "sidecar.db").read_bytes(), 10)
        provider_api.queue(Reply(events=events("openai_text.sse")))
        chat = (await sc.request("chats/create", {"title": "t"}))["chat"]["id"]
        sent = await sc.request("chat/send", {"chatId": chat, "content": "hi", "provider": "old", "model": "m"})
        assert sent["stopReason"] == "endTurn", sent
        await sc.request("shutdown")
    # The API still got the key: it now comes from the store.
    assert provider_api.requests[0].headers["authorization"] == f"Bearer {PROVIDER_KEY}"
    store = data_dir / "secrets.json"
    assert json.loads(store.read_text())["secrets"] == {"provider:old": PROVIDER_KEY}
    assert PROVIDER_KEY.encode() not in files_text(data_dir).replace(store.read_bytes(), b"")
    rows = sqlite3.connect(data_dir / "sidecar.db").execute(
        "SELECT id, api_key, api_key_secret FROM providers ORDER BY id").fetchall()
    assert rows == [("byref", "${ANTHROPIC_KEY_VAR}", None), ("old", None, "provider:old")]
    assert PROVIDER_KEY not in seen.text() and PROVIDER_KEY not in sc.stderr_text()
    # Internal entries are not the user's secrets.
    async with SidecarClient.spawn(data_dir) as again:
        assert (await again.request("secrets/list"))["secrets"] == []


async def test_a_provider_key_given_as_a_secret_reference_is_sent(data_dir: Path, provider_api: StreamServer):
    async with SidecarClient.spawn(data_dir) as sc:
        await sc.request("providers/set", {"id": "gpt", "kind": "openai", "baseUrl": provider_api.url + "/v1",
                                           "apiKey": "${GPT_KEY}", "defaultModel": "m"})
        chat = (await sc.request("chats/create", {"title": "t"}))["chat"]["id"]
        missing = await sc.request("chat/send", {"chatId": chat, "content": "hi", "provider": "gpt"})
        assert missing["stopReason"] == "error" and "GPT_KEY is not set: store it as a secret" in missing["error"]
        await sc.request("secrets/set", {"name": "GPT_KEY", "value": PROVIDER_KEY + "\r\n"})  # pasted
        provider_api.queue(Reply(events=events("openai_text.sse")))
        sent = await sc.request("chat/send", {"chatId": chat, "content": "hi", "provider": "gpt"})
        assert sent["stopReason"] == "endTurn", sent
    assert provider_api.requests[-1].headers["authorization"] == f"Bearer {PROVIDER_KEY}"


# -- the real Secret Service ---------------------------------------------------------------------

@pytest.fixture
async def on_keystore(keystore: SecretService, data_dir: Path) -> AsyncIterator[SidecarClient]:
    async with SidecarClient.spawn(data_dir, args=("--log-level", "debug"), env=keystore.env) as sc:
        yield sc


async def test_with_a_keystore_the_values_live_there_and_nowhere_in_the_data_directory(
        keystore: SecretService, on_keystore: SidecarClient, data_dir: Path):
    sc = on_keystore
    seen = Seen(sc)
    await sc.request("mcpServers/add", {"id": "ks", "command": sys.executable, "args": [str(FIXTURES / "basic.py")],
                                        "env": {"TOKEN": "${KS_TOKEN}"}})
    await status(sc, "ks~ks", "error")
    await sc.request("secrets/set", {"name": "KS_TOKEN", "value": SECRET})
    await sc.request("providers/set", {"id": "p", "kind": "openai", "apiKey": PROVIDER_KEY,
                                       "baseUrl": "https://api.example.test/v1"})
    listed = await sc.request("secrets/list")
    assert listed == {"backend": "keystore", "secrets": [
        {"name": "KS_TOKEN", "masked": "****x7Qm", "usedBy": ["mcpServer:ks~ks"]}]}
    await status(sc, "ks~ks", "connected")  # resolved from the keystore (its value reaching a server: above)
    assert {name: value for (_, name), value in keystore.items().items()} == {
        "KS_TOKEN": SECRET, "provider:p": PROVIDER_KEY}
    on_disk = files_text(data_dir)
    assert SECRET.encode() not in on_disk and PROVIDER_KEY.encode() not in on_disk
    assert not (data_dir / "secrets.json").exists()
    assert SECRET not in seen.text() and PROVIDER_KEY not in seen.text()
    await sc.request("shutdown")
    assert SECRET not in sc.stderr_text() and PROVIDER_KEY not in sc.stderr_text()


async def test_a_locked_keystore_is_a_clear_error_and_loses_nothing(keystore: SecretService, data_dir: Path):
    async with SidecarClient.spawn(data_dir, args=("--log-level", "debug"), env=keystore.env) as sc:
        await sc.request("secrets/set", {"name": "KEPT", "value": SECRET})
        keystore.lock()
        with pytest.raises(RemoteError) as locked:
            await sc.request("secrets/set", {"name": "NEW_ONE", "value": OTHER})
        assert locked.value.code == -32030
        assert "cannot store the secret NEW_ONE: the OS keystore is locked; unlock it" in locked.value.message
        listed = await sc.request("secrets/list")
        assert listed["backend"] == "keystore" and "locked" in listed["error"]
        assert [s["name"] for s in listed["secrets"]] == ["KEPT"]  # read before the lock: still known
        assert not (data_dir / "secrets.json").exists()  # no silent switch to the file
        assert OTHER not in json.dumps(listed) and OTHER not in locked.value.message
    assert OTHER not in sc.stderr_text()
    # Back (unlocked, after the keystore restarted): everything as it was.
    keystore.stop_keyring()
    keystore.start_keyring()
    async with SidecarClient.spawn(data_dir, env=keystore.env, initialize=False) as again:
        assert (await initialize(again))["capabilities"]["secretsBackend"] == "keystore"
        listed = await again.request("secrets/list")
        assert listed == {"backend": "keystore", "secrets": [{"name": "KEPT", "masked": "****x7Qm", "usedBy": []}]}
        await again.request("secrets/set", {"name": "NEW_ONE", "value": OTHER})


async def test_a_keystore_gone_at_start_is_an_error_not_the_file(keystore: SecretService, data_dir: Path):
    async with SidecarClient.spawn(data_dir, env=keystore.env) as sc:
        await sc.request("secrets/set", {"name": "KEPT", "value": SECRET})
    keystore.stop_keyring()
    async with SidecarClient.spawn(data_dir, env=keystore.env) as sc:
        with pytest.raises(RemoteError) as gone:
            await sc.request("secrets/set", {"name": "OTHER", "value": OTHER})
        assert gone.value.code == -32030 and "no OS keystore is available" in gone.value.message
        info = await sc.request("debug/info")
        assert info["secretsBackend"] == "keystore" and "no OS keystore" in info["secretsError"]
    assert not (data_dir / "secrets.json").exists()

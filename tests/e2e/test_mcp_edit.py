"""Editing a server after it was added (mcpServers/update) and importing servers whose ids are taken:
what a user changes takes effect, and what they did not change (overrides, secrets, the running
connection) stays."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import anyio
import pytest

from sidecar.client import RemoteError, SidecarClient
from tests.e2e.test_mcp import FIXTURES, add, call, status

pytestmark = pytest.mark.anyio

SECRET = "ghp-edit-Secret-Value-48Tq2w"
NEWER = "ghp-edit-Newer-Value-90Zx7k"


async def pid_of(sc: SidecarClient, key: str) -> int:
    return int((await call(sc, f"mcp:{key}:pid", {}))["result"]["content"][0]["text"])


async def update(sc: SidecarClient, **params: object) -> dict:
    return (await sc.request("mcpServers/update", params))["server"]


async def test_an_edit_changes_the_server_in_place_keeping_its_overrides(app: SidecarClient):
    await add(app, "basic", env={"FIXTURE_ECHO_PREFIX": "a:", "LOG_LEVEL": "debug"})
    await status(app, "basic~basic", "connected")
    before = await pid_of(app, "basic~basic")
    await app.request("tools/setOverride", {"toolsetId": "basic", "toolId": "mcp:basic~basic:echo",
                                            "nameOverride": "Parrot"})

    # Nothing the connection depends on: the same process goes on serving.
    asks = await update(app, id="basic", requiresConfirmation=True)
    assert asks["requiresConfirmation"] is True and asks["env"]["LOG_LEVEL"] == "debug"
    assert (await app.request("tools/get", {"id": "mcp:basic~basic:add"}))["tool"]["requiresConfirmation"] is True
    assert await pid_of(app, "basic~basic") == before

    # Sending back what the list shows changes nothing either.
    shown = next(s for s in (await app.request("mcpServers/list"))["servers"] if s["id"] == "basic~basic")
    await update(app, id="basic~basic", env=shown["env"], args=shown["command"][1:])
    assert await pid_of(app, "basic~basic") == before

    # Its environment: it restarts with the new one, its tools keep the user's overrides.
    changed = await update(app, id="basic", env={"FIXTURE_ECHO_PREFIX": "b:"})
    assert changed["env"] == {"FIXTURE_ECHO_PREFIX": "b:"}
    await status(app, "basic~basic", "connected")
    echoed = await call(app, "mcp:basic~basic:echo", {"text": "hi"})
    assert echoed["result"]["content"][0]["text"] == "b:hi"
    assert await pid_of(app, "basic~basic") != before
    assert (await app.request("tools/get", {"id": "mcp:basic~basic:echo"}))["tool"]["name"] == "Parrot"

    off = await update(app, id="basic", enabled=False)
    assert (off["status"], off["enabled"]) == ("disabled", False)
    on = await update(app, id="basic", enabled=True, callTimeout=5)
    assert on["callTimeout"] == 5
    assert (await status(app, "basic~basic", "connected"))["toolCount"] >= 5
    assert [t["id"] for t in (await app.request("toolsets/list"))["toolsets"]] == ["basic"]


async def test_a_token_given_in_an_edit_goes_to_the_secret_store_under_the_name_the_server_had(
        app: SidecarClient, data_dir: Path):
    await add(app, "keyed", env={"API_KEY": SECRET})
    await status(app, "keyed~keyed", "connected")
    assert (await call(app, "mcp:keyed~keyed:env", {"name": "API_KEY"}))["result"]["content"][0]["text"] == SECRET

    edited = await update(app, id="keyed", env={"API_KEY": NEWER, "LOG_LEVEL": "info"})
    assert edited["env"] == {"API_KEY": "${KEYED_API_KEY}", "LOG_LEVEL": "info"}
    listed = {s["name"]: s for s in (await app.request("secrets/list"))["secrets"]}
    assert list(listed) == ["KEYED_API_KEY"] and listed["KEYED_API_KEY"]["masked"] == "****Zx7k"
    await status(app, "keyed~keyed", "connected")
    assert (await call(app, "mcp:keyed~keyed:env", {"name": "API_KEY"}))["result"]["content"][0]["text"] == NEWER
    held = [p.name for p in data_dir.rglob("*") if p.is_file() and NEWER.encode() in p.read_bytes()]
    assert held == ["secrets.json"]

    # Another secret key beside it gets a name of its own; the first keeps its value.
    both = await update(app, id="keyed", env={"API_KEY": "${KEYED_API_KEY}", "OTHER_TOKEN": SECRET})
    assert both["env"] == {"API_KEY": "${KEYED_API_KEY}", "OTHER_TOKEN": "${KEYED_OTHER_TOKEN}"}
    await status(app, "keyed~keyed", "connected")
    assert (await call(app, "mcp:keyed~keyed:env", {"name": "API_KEY"}))["result"]["content"][0]["text"] == NEWER


@pytest.mark.parametrize(("params", "code", "words"), [
    ({"id": "nope", "enabled": False}, -32010, "nope"),
    ({"id": "basic", "type": "streamable-http"}, -32602, "needs an http:// or https:// url"),
    ({"id": "basic", "url": "http://127.0.0.1:1/mcp"}, -32602, "a stdio server has no url"),
    ({"id": "basic", "env": {"API_KEY": "****"}}, -32602, "send back exactly what mcpServers/list shows"),
    ({"id": "basic", "args": ["--token", "****"]}, -32602, "hidden from you"),
    ({"id": "basic", "callTimeout": -1}, -32602, "callTimeout"),
    ({"id": "basic", "nme": "x"}, -32602, "nme"),
])
async def test_a_bad_edit_says_what_to_fix_and_changes_nothing(app: SidecarClient, params: dict, code: int,
                                                               words: str):
    await add(app, "basic")
    before = next(s for s in (await app.request("mcpServers/list"))["servers"] if s["id"] == "basic~basic")
    with pytest.raises(RemoteError) as bad:
        await app.request("mcpServers/update", params)
    assert bad.value.code == code and words in bad.value.message + json.dumps(bad.value.data), bad.value
    after = next(s for s in (await app.request("mcpServers/list"))["servers"] if s["id"] == "basic~basic")
    assert {k: v for k, v in after.items() if k not in ("status", "toolCount", "serverName", "error")} == \
        {k: v for k, v in before.items() if k not in ("status", "toolCount", "serverName", "error")}
    assert (await app.request("secrets/list"))["secrets"] == []


async def test_a_server_a_toolset_declares_can_only_be_turned_on_and_off(app: SidecarClient, tmp_path: Path):
    folder = tmp_path / "ts"
    folder.mkdir()
    (folder / "toolset.yaml").write_text(
        'manifest_version: "1"\nid: decl\nname: Declared\nmcp_servers:\n'
        f'  - id: helper\n    command: {json.dumps(sys.executable)}\n    args: [{json.dumps(str(FIXTURES / "basic.py"))}]\n')
    await app.request("toolsets/import", {"path": str(folder)})
    with pytest.raises(RemoteError) as refused:
        await app.request("mcpServers/update", {"id": "decl~helper", "env": {"X": "y"}})
    assert refused.value.code == -32011 and "import it with replace" in refused.value.message
    off = await update(app, id="decl~helper", enabled=False)
    assert off["status"] == "disabled"


async def test_an_import_renames_or_skips_the_servers_whose_ids_are_taken(app: SidecarClient, tmp_path: Path):
    await add(app, "basic")
    config = tmp_path / "claude_desktop_config.json"
    basic = {"command": sys.executable, "args": [str(FIXTURES / "basic.py")]}
    config.write_text(json.dumps({"mcpServers": {"basic": basic, "fresh": basic}}))
    preview = {s["id"]: s for s in (await app.request("mcpServers/importPreview", {"path": str(config)}))["servers"]}
    assert (preview["basic"]["exists"], preview["basic"]["suggestedId"]) == (True, "basic-2")
    assert "exists" not in preview["fresh"] and "suggestedId" not in preview["fresh"]  # false, left out

    with pytest.raises(RemoteError) as refused:
        await app.request("mcpServers/import", {"path": str(config), "ids": ["basic", "fresh"], "onConflict": "fail"})
    assert refused.value.code == -32011 and "basic" in refused.value.message
    assert "Nothing was imported" in refused.value.message
    assert [t["id"] for t in (await app.request("toolsets/list"))["toolsets"]] == ["basic"]

    skipped = await app.request("mcpServers/import", {"path": str(config), "ids": ["basic", "fresh"],
                                                      "onConflict": "skip"})
    assert [s["id"] for s in skipped["servers"]] == ["fresh~fresh"]
    assert skipped["skipped"][0]["id"] == "basic" and "basic-2" in skipped["skipped"][0]["reason"]

    renamed = await app.request("mcpServers/import", {"path": str(config), "ids": ["basic"],
                                                      "rename": {"basic": "basic-2"}})
    assert [s["id"] for s in renamed["servers"]] == ["basic-2~basic-2"]
    await status(app, "basic-2~basic-2", "connected")

    for params, code, path_or_words in [
        ({"ids": ["basic"], "rename": {"basic": "fresh"}}, -32011, "'fresh' exists already"),
        ({"ids": ["basic"], "rename": {"fresh": "x"}}, -32602, "params.rename.fresh"),
        ({"ids": ["basic", "fresh"], "rename": {"basic": "x", "fresh": "x"}}, -32602, "give each its own"),
        ({"ids": ["basic"], "rename": {"basic": "bad id"}}, -32602, "params.rename"),
    ]:
        with pytest.raises(RemoteError) as bad:
            await app.request("mcpServers/import", {"path": str(config), **params})
        assert bad.value.code == code and path_or_words in bad.value.message + json.dumps(bad.value.data), params
    assert len((await app.request("toolsets/list"))["toolsets"]) == 3


async def test_a_server_changes_kind_in_place_and_back(app: SidecarClient):
    await add(app, "basic")
    await status(app, "basic~basic", "connected")
    remote = await update(app, id="basic", type="streamable-http", url="http://127.0.0.1:1/mcp", connectTimeout=10)
    assert (remote["type"], remote["url"]) == ("streamable-http", "http://127.0.0.1:1/mcp")
    assert "command" not in remote  # the stdio fields went with the kind
    assert (await status(app, "basic~basic", "error"))["error"]  # nothing listens there (wording: the host's)
    back = await update(app, id="basic", type="stdio", command=sys.executable, args=[str(FIXTURES / "basic.py")])
    assert "url" not in back and back["command"][0] == sys.executable
    await status(app, "basic~basic", "connected")


async def test_a_literal_stored_before_the_secret_store_survives_an_edit_that_sends_it_back_masked(data_dir: Path):
    async with SidecarClient.in_process(data_dir, secrets_backend="file") as sc:
        await add(sc, "old", env={"LOG_LEVEL": "debug"})
    # A row from before literal tokens moved to the secret store holds the token itself.
    with sqlite3.connect(data_dir / "sidecar.db") as db:
        db.execute("UPDATE toolset_mcp_servers SET env = ? WHERE id = 'old'",
                   (json.dumps({"API_TOKEN": SECRET, "LOG_LEVEL": "debug"}),))
    async with SidecarClient.in_process(data_dir, secrets_backend="file") as sc:
        shown = next(s for s in (await sc.request("mcpServers/list"))["servers"] if s["id"] == "old~old")
        assert shown["env"] == {"API_TOKEN": "****", "LOG_LEVEL": "debug"}
        edited = await update(sc, id="old", env={**shown["env"], "LOG_LEVEL": "info"})
        # The edit moved the old literal where a new one would go.
        assert edited["env"] == {"API_TOKEN": "${OLD_API_TOKEN}", "LOG_LEVEL": "info"}
        await status(sc, "old~old", "connected")
        got = await call(sc, "mcp:old~old:env", {"name": "API_TOKEN"})
        assert got["result"]["content"][0]["text"] == SECRET
        assert (await call(sc, "mcp:old~old:env", {"name": "LOG_LEVEL"}))["result"]["content"][0]["text"] == "info"


async def test_two_adds_of_one_id_at_once_leave_the_winner_its_secret(app: SidecarClient):
    results: dict[str, object] = {}

    async def attempt(token: str) -> None:
        try:
            results[token] = await add(app, "twice", env={"API_TOKEN": token})
        except RemoteError as exc:
            results[token] = exc

    async with anyio.create_task_group() as tg:
        tg.start_soon(attempt, SECRET)
        tg.start_soon(attempt, NEWER)
    won = [t for t, r in results.items() if isinstance(r, dict)]
    lost = [r for r in results.values() if isinstance(r, RemoteError)]
    assert len(won) == 1 and len(lost) == 1 and lost[0].code == -32011
    await status(app, "twice~twice", "connected")
    got = await call(app, "mcp:twice~twice:env", {"name": "API_TOKEN"})
    assert got["result"]["content"][0]["text"] == won[0]


async def test_the_preview_names_the_variables_an_import_will_ask_for(app: SidecarClient, tmp_path: Path):
    config = tmp_path / "mcp.json"  # VS Code's: a prompt for the token becomes a variable
    config.write_text(json.dumps({
        "inputs": [{"id": "github-token", "type": "promptString", "password": True}],
        "servers": {"gh": {"type": "stdio", "command": sys.executable, "args": [str(FIXTURES / "basic.py")],
                           "env": {"GITHUB_TOKEN": "${input:github-token}", "LOG_LEVEL": "debug"}}}}))
    found = (await app.request("mcpServers/importPreview", {"path": str(config)}))["servers"][0]
    assert found["unsetVariables"] == ["GITHUB_TOKEN"]
    await app.request("secrets/set", {"name": "GITHUB_TOKEN", "value": SECRET})
    found = (await app.request("mcpServers/importPreview", {"path": str(config)}))["servers"][0]
    assert "unsetVariables" not in found  # none left: left out
    await app.request("mcpServers/import", {"path": str(config), "ids": ["gh"]})
    await status(app, "gh~gh", "connected")
    assert (await call(app, "mcp:gh~gh:env", {"name": "GITHUB_TOKEN"}))["result"]["content"][0]["text"] == SECRET

"""Importing servers from other apps' configs through the sidecar, as a user does: a VS Code
workspace's server that asks for a key, a Claude Code project's server that runs from its folder, a
shell line in command, two imports of one file at once, and a file far too big."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import anyio
import pytest

from sidecar.client import RemoteError, SidecarClient
from tests.e2e.test_mcp import FIXTURES, add, call, status

pytestmark = pytest.mark.anyio

TOKEN = "ppl-import-Secret-Value-7Hq2"


def text_of(result: dict) -> str:
    return result["result"]["content"][0]["text"]


async def test_a_vscode_workspace_server_gets_its_folder_and_its_input_as_a_secret(app: SidecarClient, tmp_path: Path):
    workspace = tmp_path / "work"
    (workspace / ".vscode").mkdir(parents=True)
    shutil.copy(FIXTURES / "basic.py", workspace / "server.py")
    config = workspace / ".vscode" / "mcp.json"
    config.write_text("""{
      // as VS Code writes it: comments, trailing commas, an input prompted for
      "inputs": [{"type": "promptString", "id": "ppl-key", "description": "Perplexity API Key", "password": true}],
      "servers": {
        "ppl": {"type": "stdio", "command": "%s", "args": ["${workspaceFolder}/server.py"],
                "env": {"PERPLEXITY_API_KEY": "${input:ppl-key}", "FIXTURE_ECHO_PREFIX": "${workspaceFolderBasename}:"},},
      },
    }""" % sys.executable)
    preview = await app.request("mcpServers/importPreview", {"path": str(config)})
    (found,) = preview["servers"]
    assert (found["id"], found["source"], found["project"]) == ("ppl", "vscode", str(workspace))
    assert found["command"] == [sys.executable, str(workspace / "server.py")]
    assert found["inputs"] == [{"name": "PPL_KEY", "promptId": "ppl-key", "description": "Perplexity API Key",
                                "password": True}]
    assert found["unsetVariables"] == ["PPL_KEY"]
    assert any("PPL_KEY with secrets/set" in w for w in found["warnings"])

    await app.request("secrets/set", {"name": "PPL_KEY", "value": TOKEN})
    again = (await app.request("mcpServers/importPreview", {"path": str(config)}))["servers"][0]
    assert "unsetVariables" not in again
    added = await app.request("mcpServers/import", {"path": str(config), "ids": ["ppl"]})
    assert [s["id"] for s in added["servers"]] == ["ppl~ppl"]
    await status(app, "ppl~ppl", "connected")
    assert text_of(await call(app, "mcp:ppl~ppl:env", {"name": "PERPLEXITY_API_KEY"})) == TOKEN
    assert text_of(await call(app, "mcp:ppl~ppl:echo", {"text": "hi"})) == "work:hi"


async def test_a_claude_code_project_server_runs_from_its_folder_and_a_shell_line_is_split(
        app: SidecarClient, tmp_path: Path):
    project = tmp_path / "webapp"
    project.mkdir()
    shutil.copy(FIXTURES / "basic.py", project / "server.py")
    config = project / ".mcp.json"
    config.write_text(json.dumps({"mcpServers": {
        "local": {"command": sys.executable, "args": ["server.py"],  # relative: Claude Code starts it in the project
                  "env": {"FIXTURE_ECHO_PREFIX": "${ECHO_PREFIX_UNSET_HERE:-dflt}:"}},
        "oneline": {"command": f"{sys.executable} {FIXTURES / 'basic.py'}"},
        "piped": {"command": "cat x | mcp-replay"},
    }}))
    preview = await app.request("mcpServers/importPreview", {"path": str(config)})
    servers = {s["id"]: s for s in preview["servers"]}
    assert servers["oneline"]["command"] == [sys.executable, str(FIXTURES / "basic.py")]
    assert any("was split into the program" in w for w in servers["oneline"]["warnings"])
    assert [(s["id"], "shell line" in s["reason"], s["path"]) for s in preview["skipped"]] == [
        ("piped", True, str(config))]
    added = await app.request("mcpServers/import", {"path": str(config), "ids": ["local", "oneline"]})
    assert len(added["servers"]) == 2
    await status(app, "local~local", "connected")
    await status(app, "oneline~oneline", "connected")
    assert text_of(await call(app, "mcp:local~local:echo", {"text": "x"})) == "dflt:x"
    bad = await app.request_raw("mcpServers/import", {"path": str(config), "ids": ["piped"]})
    assert bad["error"]["code"] == -32602 and bad["error"]["data"]["path"] == "params.ids[0]"


async def test_two_imports_of_one_file_at_once_add_each_server_once(app: SidecarClient, tmp_path: Path):
    config = tmp_path / "claude_desktop_config.json"
    basic = {"command": sys.executable, "args": [str(FIXTURES / "basic.py")]}
    config.write_text(json.dumps({"mcpServers": {"one": basic, "two": {**basic, "env": {"API_KEY": TOKEN}}}}))
    results: list[dict] = []

    async def import_all() -> None:
        results.append(await app.request("mcpServers/import", {"path": str(config), "ids": ["one", "two"]}))

    async with anyio.create_task_group() as tg:
        tg.start_soon(import_all)
        tg.start_soon(import_all)
    listed = sorted(s["id"] for s in (await app.request("mcpServers/list"))["servers"])
    assert listed == ["one~one", "two~two"]
    first, second = sorted(results, key=lambda r: len(r["servers"]), reverse=True)
    assert len(first["servers"]) == 2 and second["servers"] == []
    assert sorted(s["id"] for s in second["skipped"]) == ["one", "two"]
    assert all("installed already" in s["reason"] for s in second["skipped"])  # "two"'s key compared resolved
    await status(app, "two~two", "connected")


async def test_an_import_renames_a_different_server_whose_id_is_taken_and_adds_the_rest(
        app: SidecarClient, tmp_path: Path):
    await add(app, "basic")
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {
        "basic": {"command": sys.executable, "args": [str(FIXTURES / "basic.py")], "env": {"FIXTURE_ECHO_PREFIX": "b:"}},
        "fresh": {"command": sys.executable, "args": [str(FIXTURES / "basic.py")], "disabled": True}}}))
    done = await app.request("mcpServers/import", {"path": str(config), "ids": ["basic", "fresh"]})
    assert done["renamed"] == {"basic": "basic-2"}
    assert {s["id"]: s["status"] for s in done["servers"]} == {"basic-2~basic-2": "connecting", "fresh~fresh": "disabled"}
    await status(app, "basic-2~basic-2", "connected")
    assert text_of(await call(app, "mcp:basic-2~basic-2:echo", {"text": "x"})) == "b:x"


async def test_a_50_mb_config_is_refused_with_what_to_fix(app: SidecarClient, tmp_path: Path):
    big = tmp_path / "mcp.json"
    with big.open("wb") as f:
        f.truncate(50 << 20)
    with pytest.raises(RemoteError) as refused:
        await app.request("mcpServers/importPreview", {"path": str(big)})
    assert refused.value.code == -32602 and "larger than 1 MiB (50 MiB)" in refused.value.message
    with pytest.raises(RemoteError) as relative:
        await app.request("mcpServers/importPreview", {"path": str(big), "project": "webapp"})
    assert relative.value.code == -32602 and "params.project" in json.dumps(relative.value.data)
    assert await app.request("ping") == {}

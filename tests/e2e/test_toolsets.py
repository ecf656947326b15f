"""toolsets/* through the real process."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from sidecar.client import SidecarClient

pytestmark = pytest.mark.anyio

EXAMPLE = Path(__file__).resolve().parents[1] / "fixtures" / "toolsets" / "app-builder"

SERVERS = '''
mcp_servers:
  - id: search
    command: npx
    args: ["-y", "search-server", "--api-key", "sk-live-123", "--region=eu"]
    env:
      API_KEY: "${SEARCH_API_KEY}"
      LITERAL_TOKEN: "abc123"
  - id: remote
    type: streamable-http
    url: "https://user:pw@example.com/mcp?token=secret&mode=fast"
    headers:
      Authorization: "Bearer hunter2"
'''


async def test_inspect_shows_what_would_be_installed_with_secrets_masked(sidecar: SidecarClient, tmp_path: Path, data_dir: Path):
    folder = tmp_path / "ts"
    shutil.copytree(EXAMPLE, folder)
    with open(folder / "toolset.yaml", "a") as f:
        f.write(SERVERS)
    got = await sidecar.request("toolsets/inspect", {"path": str(folder)})
    assert got["manifest"]["id"] == "app-builder" and got["sourceType"] == "local"
    assert [t["id"] for t in got["tools"]] == ["app-builder:write_file", "app-builder:read_file",
                                             "app-builder:run_command", "app-builder:word_stats"]
    run = got["tools"][2]
    assert run["requiresConfirmation"] is True and run["timeout"] == 30 and run["renderer"] == "code"
    search, remote = got["mcpServers"]
    assert search["command"] == ["npx", "-y", "search-server", "--api-key", "****", "--region=eu"]
    assert search["env"] == {"API_KEY": "${SEARCH_API_KEY}", "LITERAL_TOKEN": "****"}
    assert remote["url"] == "https://****@example.com/mcp?token=****&mode=fast"  # mode is no secret
    assert remote["headers"] == {"Authorization": "Bearer ****"}
    text = str(got)
    for secret in ("sk-live-123", "abc123", "hunter2", "secret", "pw@"):
        assert secret not in text
    assert {f["path"]: f["kind"] for f in got["files"]}["artifacts/stats.html"] == "artifact"
    assert not (data_dir / "toolsets").exists()  # inspect installs nothing


async def test_inspect_rejections_are_invalid_bundle_with_the_place(sidecar: SidecarClient, tmp_path: Path):
    folder = tmp_path / "ts"
    shutil.copytree(EXAMPLE, folder)
    text = (folder / "toolset.yaml").read_text().replace("tools.files:read_file", "tools.files:nope")
    (folder / "toolset.yaml").write_text(text)
    reply = await sidecar.request_raw("toolsets/inspect", {"path": str(folder)})
    error = reply["error"]
    assert error["code"] == -32013
    assert error["data"] == {"path": "toolset.yaml: tools[1].entrypoint",
                             "reason": '"tools.files:nope" has no function nope in tools/files.py'}
    missing = await sidecar.request_raw("toolsets/inspect", {"path": str(tmp_path / "nothing.zip")})
    assert missing["error"]["code"] == -32013 and "does not exist" in missing["error"]["message"]
    assert await sidecar.request("ping") == {}


async def test_import_get_list_enable_and_uninstall(sidecar: SidecarClient, data_dir: Path):
    toolset = (await sidecar.request("toolsets/import", {"path": str(EXAMPLE)}))["toolset"]
    assert toolset["id"] == "app-builder" and toolset["enabled"] is True
    assert toolset["sourceType"] == "local" and toolset["userMcp"] is False
    assert [t["id"] for t in (await sidecar.request("toolsets/list"))["toolsets"]] == ["app-builder"]
    detail = await sidecar.request("toolsets/get", {"id": "app-builder"})
    tools = {t["id"]: t for t in detail["tools"]}
    assert set(tools) == {"app-builder:write_file", "app-builder:read_file", "app-builder:run_command",
                          "app-builder:word_stats"}
    assert tools["app-builder:write_file"]["renderer"] == "code"
    assert tools["app-builder:write_file"]["rendererConfig"] == {"file": "$args.path", "language": "auto", "editable": True}
    assert tools["app-builder:write_file"]["inputSchema"]["required"] == ["path", "content"]
    assert tools["app-builder:run_command"]["requiresConfirmation"] is True
    assert tools["app-builder:word_stats"]["renderer"] == "html"
    stored = list((data_dir / "toolsets" / "app-builder").glob("*/tools/files.py"))
    assert len(stored) == 1 and stored[0].read_bytes() == (EXAMPLE / "tools" / "files.py").read_bytes()

    again = await sidecar.request_raw("toolsets/import", {"path": str(EXAMPLE)})
    assert again["error"]["code"] == -32011 and "replace" in again["error"]["message"]

    off = (await sidecar.request("toolsets/setEnabled", {"id": "app-builder", "enabled": False}))["toolset"]
    assert off["enabled"] is False
    detail = await sidecar.request("toolsets/get", {"id": "app-builder"})
    assert not any(t["enabled"] for t in detail["tools"])  # a disabled toolset hides its tools

    await sidecar.request("toolsets/uninstall", {"id": "app-builder"})
    assert (await sidecar.request("toolsets/list"))["toolsets"] == []
    assert not (data_dir / "toolsets" / "app-builder").exists()
    gone = await sidecar.request_raw("toolsets/get", {"id": "app-builder"})
    assert gone["error"]["code"] == -32010


async def test_upgrade_in_place_replaces_the_files_and_keeps_one_revision(sidecar: SidecarClient, tmp_path: Path, data_dir: Path):
    folder = tmp_path / "ts"
    shutil.copytree(EXAMPLE, folder)
    await sidecar.request("toolsets/import", {"path": str(folder)})
    newer = tmp_path / "ts-1.1"  # not an edit of the first folder, which the authoring loop follows
    shutil.copytree(EXAMPLE, newer)
    text = (newer / "toolset.yaml").read_text().replace('version: "1.0.0"', 'version: "1.1.0"')
    (newer / "toolset.yaml").write_text(text.replace("Write content to a file", "Write a file"))
    upgraded = (await sidecar.request("toolsets/import", {"path": str(newer), "replace": True}))["toolset"]
    assert upgraded["version"] == "1.1.0"
    tools = {t["id"]: t for t in (await sidecar.request("toolsets/get", {"id": "app-builder"}))["tools"]}
    assert tools["app-builder:write_file"]["description"] == "Write a file in the workspace"
    assert len(list((data_dir / "toolsets" / "app-builder").iterdir())) == 1  # the old revision went


async def test_a_failed_import_leaves_no_rows_and_no_files(sidecar: SidecarClient, tmp_path: Path, data_dir: Path):
    folder = tmp_path / "ts"
    shutil.copytree(EXAMPLE, folder)
    (folder / "tools" / "shell.py").write_text("def run_command(:\n")
    reply = await sidecar.request_raw("toolsets/import", {"path": str(folder)})
    assert reply["error"]["code"] == -32013 and reply["error"]["data"]["path"] == "tools/shell.py:1"
    assert (await sidecar.request("toolsets/list"))["toolsets"] == []
    assert not any((data_dir / "toolsets").rglob("*.py")) if (data_dir / "toolsets").exists() else True


async def test_export_then_import_gives_the_same_toolset_without_secrets(sidecar: SidecarClient, tmp_path: Path):
    import zipfile

    import yaml

    folder = tmp_path / "ts"
    shutil.copytree(EXAMPLE, folder)
    with open(folder / "toolset.yaml", "a") as f:
        f.write(SERVERS)
    await sidecar.request("toolsets/import", {"path": str(folder)})
    before = await sidecar.request("toolsets/get", {"id": "app-builder"})
    out = tmp_path / "exported.zip"
    got = await sidecar.request("toolsets/export", {"id": "app-builder", "path": str(out)})
    assert got["path"] == str(out) and got["size"] == out.stat().st_size
    with zipfile.ZipFile(out) as z:
        names = set(z.namelist())
        manifest = z.read("toolset.yaml").decode()
    assert {"toolset.yaml", "tools/files.py", "tools/stats.py", "artifacts/stats.html"} <= names
    for secret in ("sk-live-123", "abc123", "hunter2", "secret", "user:pw"):
        assert secret not in manifest
    servers = {s["id"]: s for s in yaml.safe_load(manifest)["mcp_servers"]}
    assert servers["search"]["env"] == {"API_KEY": "${SEARCH_API_KEY}", "LITERAL_TOKEN": "${LITERAL_TOKEN}"}
    assert servers["search"]["args"][3] == "${API_KEY}"
    assert servers["remote"]["headers"] == {"Authorization": "Bearer ${AUTHORIZATION}"}
    assert "token=${TOKEN}" in servers["remote"]["url"]

    await sidecar.request("toolsets/uninstall", {"id": "app-builder"})
    await sidecar.request("toolsets/import", {"path": str(out)})
    after = await sidecar.request("toolsets/get", {"id": "app-builder"})

    def untimed(tools: list[dict]) -> list[dict]:  # a new install is a new createdAt
        return [{k: v for k, v in t.items() if k not in ("createdAt", "modifiedAt")} for t in tools]

    assert untimed(after["tools"]) == untimed(before["tools"])
    assert [s["serverId"] for s in after["mcpServers"]] == ["search", "remote"]
    bad = await sidecar.request_raw("toolsets/export", {"id": "app-builder", "path": "relative.zip"})
    assert bad["error"]["code"] == -32602


async def test_overrides_apply_on_read_and_survive_an_upgrade(sidecar: SidecarClient, tmp_path: Path):
    folder = tmp_path / "ts"
    shutil.copytree(EXAMPLE, folder)
    await sidecar.request("toolsets/import", {"path": str(folder)})
    tool = (await sidecar.request("tools/setOverride", {
        "toolsetId": "app-builder", "toolId": "read_file", "nameOverride": "Peek",
        "requiresConfirmation": True, "renderer": "document"}))["tool"]
    assert (tool["id"], tool["name"], tool["requiresConfirmation"], tool["renderer"]) == \
        ("app-builder:read_file", "Peek", True, "document")
    assert tool["rendererConfig"] == {"file": "$args.path", "language": "auto"}  # untouched field kept
    hidden = await sidecar.request("tools/setOverride", {"toolsetId": "app-builder", "toolId": "app-builder:write_file", "enabled": False})
    assert hidden["tool"]["enabled"] is False
    listed = [t["id"] for t in (await sidecar.request("tools/list"))["tools"]]
    assert "app-builder:write_file" not in listed and "app-builder:read_file" in listed
    everything = [t["id"] for t in (await sidecar.request("tools/list", {"includeDisabled": True}))["tools"]]
    assert "app-builder:write_file" in everything

    text = (folder / "toolset.yaml").read_text().replace('version: "1.0.0"', 'version: "2.0.0"')
    (folder / "toolset.yaml").write_text(text)
    await sidecar.request("toolsets/import", {"path": str(folder), "replace": True})
    kept = (await sidecar.request("tools/get", {"id": "app-builder:read_file"}))["tool"]
    assert kept["name"] == "Peek" and kept["requiresConfirmation"] is True  # the user's choice survives

    cleared = (await sidecar.request("tools/setOverride", {"toolsetId": "app-builder", "toolId": "read_file", "nameOverride": None}))["tool"]
    assert cleared["name"] == "Read File"
    missing = await sidecar.request_raw("tools/setOverride", {"toolsetId": "app-builder", "toolId": "nope", "enabled": False})
    assert missing["error"]["code"] == -32010
    bad = await sidecar.request_raw("tools/setOverride", {"toolsetId": "app-builder", "toolId": "read_file", "renderer": "fancy"})
    assert bad["error"]["code"] == -32602


async def test_an_entrypoint_relative_to_tools_installs_and_runs_as_inspect_said(sidecar: SidecarClient, tmp_path: Path):
    # Seed 000 §4.1: the module path is relative to the toolset's tools/ folder.
    folder = tmp_path / "hello"
    (folder / "tools").mkdir(parents=True)
    (folder / "tools" / "hello.py").write_text("def run(workspace, name: str = 'you'):\n    return f'hello {name}'\n")
    (folder / "toolset.yaml").write_text(
        'manifest_version: "1"\nid: hello\nname: Hello\ntools:\n  - id: greet\n    entrypoint: hello:run\n'
        '    input_schema: {type: object, properties: {name: {type: string}}}\n')
    inspected = await sidecar.request("toolsets/inspect", {"path": str(folder)})
    assert [t["entrypoint"] for t in inspected["tools"]] == ["hello:run"]
    await sidecar.request("toolsets/import", {"path": str(folder)})
    chat_id = (await sidecar.request("chats/create", {"title": "t"}))["chat"]["id"]
    call = (await sidecar.request("tools/call", {"toolId": "hello:greet", "args": {"name": "ada"},
                                                 "chatId": chat_id}))["toolCall"]
    assert (call["status"], call["result"]) == ("success", "hello ada"), call


async def test_overrides_inside_a_disabled_toolset_are_refused_until_it_is_enabled(sidecar: SidecarClient):
    await sidecar.request("toolsets/import", {"path": str(EXAMPLE)})
    await sidecar.request("toolsets/setEnabled", {"id": "app-builder", "enabled": False})
    refused = await sidecar.request_raw("tools/setOverride", {"toolsetId": "app-builder", "toolId": "read_file",
                                                              "nameOverride": "Peek"})
    assert refused["error"]["code"] == -32011, refused
    assert "enable" in refused["error"]["message"] and "app-builder" in refused["error"]["message"]
    tool = (await sidecar.request("tools/get", {"id": "app-builder:read_file"}))["tool"]
    assert tool["name"] == "Read File"  # nothing changed
    await sidecar.request("toolsets/setEnabled", {"id": "app-builder", "enabled": True})
    done = (await sidecar.request("tools/setOverride", {"toolsetId": "app-builder", "toolId": "read_file",
                                                        "nameOverride": "Peek"}))["tool"]
    assert done["name"] == "Peek"


async def test_an_override_naming_a_tool_keeps_its_legacy_renderer(sidecar: SidecarClient, tmp_path: Path):
    folder = tmp_path / "ts"
    shutil.copytree(EXAMPLE, folder)
    with open(folder / "toolset.yaml", "a") as f:
        f.write("  - tool_id: read_file\n    name_override: Peek\n")
    inspected = await sidecar.request("toolsets/inspect", {"path": str(folder)})
    assert {t["id"]: t.get("renderer") for t in inspected["tools"]}["app-builder:read_file"] == "code"
    await sidecar.request("toolsets/import", {"path": str(folder)})
    tool = (await sidecar.request("tools/get", {"id": "app-builder:read_file"}))["tool"]
    assert (tool["name"], tool["renderer"]) == ("Peek", "code")
    assert tool["rendererConfig"] == {"file": "$args.path", "language": "auto"}

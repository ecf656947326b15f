"""Reading other apps' MCP server configs: names, types, nesting, size and odd files (each app's own
format: test_app_formats.py)."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from sidecar.mcp_host.app_configs import ConfigError, discover, read

CLAUDE = {"mcpServers": {
    "filesystem": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]},
    "github": {"command": "docker", "args": ["run", "-i", "ghcr.io/github/github-mcp-server"],
               "env": {"GITHUB_TOKEN": "ghp_secret"}},
    "my server!": {"command": "uvx", "args": ["thing"]},
    "broken": {"args": ["no command"]},
}}

VSCODE = """{
  // VS Code writes JSON with comments
  "inputs": [{"type": "promptString", "id": "perplexity-key", "description": "API key", "password": true}],
  "servers": {
    "perplexity": {"type": "stdio", "command": "npx", "args": ["-y", "server-perplexity-ask"],
                   "env": {"PERPLEXITY_API_KEY": "${input:perplexity-key}", "HOME_DIR": "${env:HOME}"}},
    "remote": {"type": "http", "url": "https://api.example.com/mcp", "headers": {"Authorization": "Bearer x"}},
    "events": {"type": "sse", "url": "http://localhost:3001/sse"},
    "odd": {"type": "websocket", "url": "ws://x"},
  },
}"""

CURSOR = {"mcpServers": {"linear": {"url": "https://mcp.linear.app/sse"},
                         "web": {"url": "https://example.com/mcp", "headers": {"X-Key": "k"}}}}


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_claude_desktop_servers_with_names_made_safe(tmp_path: Path):
    found, warnings = read(write(tmp_path / "claude_desktop_config.json", json.dumps(CLAUDE)))
    by_id = {f.id: f for f in found}
    assert sorted(by_id) == ["filesystem", "github", "my-server"]
    assert by_id["github"].env == {"GITHUB_TOKEN": "ghp_secret"} and by_id["github"].type == "stdio"
    assert by_id["filesystem"].args[-1] == "/tmp"
    assert any("renamed" in w for w in by_id["my-server"].warnings)
    assert any("'broken' skipped" in w and "command" in w for w in warnings)


def test_vscode_inputs_become_environment_placeholders(tmp_path: Path):
    found, warnings = read(write(tmp_path / "Code" / "User" / "mcp.json", VSCODE))
    by_id = {f.id: f for f in found}
    assert by_id["perplexity"].env == {"PERPLEXITY_API_KEY": "${PERPLEXITY_KEY}", "HOME_DIR": "${HOME}"}
    assert any("PERPLEXITY_KEY" in w for w in by_id["perplexity"].warnings)
    assert by_id["remote"].type == "streamable-http" and by_id["remote"].headers == {"Authorization": "Bearer x"}
    assert by_id["events"].type == "sse"
    assert "odd" not in by_id and any("'odd' skipped" in w for w in warnings)


def test_cursor_urls_pick_their_transport(tmp_path: Path):
    found, _ = read(write(tmp_path / ".cursor" / "mcp.json", json.dumps(CURSOR)))
    assert {f.id: f.type for f in found} == {"linear": "sse", "web": "streamable-http"}
    assert all(f.source == "cursor" for f in found)


@pytest.mark.parametrize("text, reason", [
    ("[1, 2]", "not an object"), ("{not json", "not valid JSON"), ('{"other": {}}', "no mcpServers"),
])
def test_files_that_are_not_mcp_configs_say_so(tmp_path: Path, text: str, reason: str):
    with pytest.raises(ConfigError, match=reason):
        read(write(tmp_path / "x.json", text))


def test_discover_reads_every_app_and_offers_each_id_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / ".config"))
    write(tmp_path / ".config" / "Claude" / "claude_desktop_config.json", json.dumps(CLAUDE))
    write(tmp_path / ".config" / "Code" / "User" / "mcp.json", VSCODE)
    write(tmp_path / ".cursor" / "mcp.json", json.dumps({"mcpServers": {"github": {"command": "other"}}}))
    found, _, warnings = discover(None)
    sources = {f.id: f.source for f in found}
    assert sources["github"] == "claude" and sources["perplexity"] == "vscode"
    # Cursor's different "github" is offered too, renamed, and says why.
    renamed = next(f for f in found if f.id == "github-cursor")
    assert renamed.command == "other" and any("renamed from 'github'" in w for w in renamed.warnings)
    assert warnings == []
    with pytest.raises(FileNotFoundError):
        discover(tmp_path / "missing.json")


def test_a_config_nested_deeper_than_any_real_one_is_refused(tmp_path: Path):
    deep = '{"mcpServers": {"a": ' + '{"x": ' * 3_000 + "1" + "}" * 3_000 + "}}"  # was a RecursionError: -32603
    with pytest.raises(ConfigError, match="nested more than 64 levels"):
        read(write(tmp_path / "deep.json", deep))
    arrays = '{"mcpServers": {}, "other": ' + "[" * 100 + "]" * 100 + "}"
    with pytest.raises(ConfigError, match="nested more than 64 levels"):
        read(write(tmp_path / "arrays.json", arrays))
    # JSON5 ends a line comment at a carriage return: the brackets after it count.
    hidden = "{mcpServers: {}, // a comment\r other: " + "[" * 200 + "]" * 200 + "}"
    with pytest.raises(ConfigError, match="nested more than 64 levels"):
        read(write(tmp_path / "hidden.json", hidden))


def test_a_config_over_the_size_limit_is_refused(tmp_path: Path):
    servers = {f"s{i}": {"command": "x", "args": ["a" * 40]} for i in range(50_000)}  # 3.7 MB: 138 s of json5
    with pytest.raises(ConfigError, match="larger than 1 MiB"):
        read(write(tmp_path / "big.json", json.dumps({"mcpServers": servers})))


def test_a_big_plain_json_config_is_read_whole(tmp_path: Path):
    servers = {f"s{i}": {"command": "x", "args": ["a", "b"]} for i in range(15_000)}
    found, warnings = read(write(tmp_path / "many.json", json.dumps({"mcpServers": servers})))
    assert len(found) == 15_000 and warnings == []


def test_comments_and_trailing_commas_go_but_strings_keep_what_looks_like_them(tmp_path: Path):
    text = """{
      "servers": {
        "a": {"command": "run", "args": ["// not a comment", "/* kept */", "x,]",],  // gone
              "url": null,},
        /* a block
           comment */
      },
    }"""
    found, _ = read(write(tmp_path / "Code" / "User" / "mcp.json", text))
    assert [(f.id, f.command, f.args) for f in found] == [("a", "run", ["// not a comment", "/* kept */", "x,]"])]


def test_small_json5_still_reads(tmp_path: Path):
    found, _ = read(write(tmp_path / "x.json", "{mcpServers: {a: {command: 'npx', args: ['-y', 'x']}}}"))
    assert [(f.id, f.command, f.args) for f in found] == [("a", "npx", ["-y", "x"])]


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path):
    pipe = tmp_path / "mcp.json"
    os.mkfifo(pipe)
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            discover(pipe)
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(20)
    if thread.is_alive():
        os.close(os.open(pipe, os.O_WRONLY | os.O_NONBLOCK))  # release the blocked reader
        pytest.fail("reading the config blocked on a FIFO")
    assert isinstance(outcome[0], ConfigError) and "not a regular file" in str(outcome[0])


JUNK = [None, 1, 1.5, True, "x", "", [], {}, [1, {}], {"a": []}, {"path": 3}, "${input:}", "${env:}", "${x:-}",
        "a b | c", "./x", "~", "${", "${file:}", "http://x", "${A}/x", {"type": "stdio"}, ["stdio"]]
KEYS = ["type", "command", "args", "env", "cwd", "url", "serverUrl", "headers", "disabled", "enabled", "envFile",
        "cmd", "envs", "env_keys", "uri", "source", "settings", "path"]
FILES = [("c.json", "mcpServers"), (".vscode/mcp.json", "servers"), (".zed/settings.json", "context_servers"),
         ("config.yaml", "extensions"), ("p/.mcp.json", "mcpServers"), ("mcp_config.json", "mcpServers"),
         (".claude.json", "mcpServers")]


@pytest.mark.parametrize("seed", range(4))
def test_any_shape_of_entry_is_a_server_a_skip_or_a_refusal_of_the_file_never_a_crash(tmp_path: Path, seed: int):
    """Whatever an app's file holds, reading it ends in servers, per-entry skips or a ConfigError (a
    crash would reach the UI as an internal error and cost every other file's servers)."""
    import random

    rnd = random.Random(seed)
    for i in range(150):
        name, top = rnd.choice(FILES)
        entry = {k: rnd.choice(JUNK) for k in rnd.sample(KEYS, rnd.randint(0, 6))}
        data: dict = {top: {"s": entry, "t": rnd.choice(JUNK)} if rnd.random() > 0.1 else rnd.choice(JUNK)}
        if rnd.random() < 0.2:
            data["inputs"] = rnd.choice(JUNK)
        if name == ".claude.json" and rnd.random() < 0.5:
            data["projects"] = rnd.choice([{"/p": {"mcpServers": {"s": entry}}}, {"/p": 3}, 3])
        path = write(tmp_path / str(i) / name, json.dumps(data))  # JSON is YAML too
        try:
            found, skipped, _ = discover(path)
        except ConfigError:
            continue
        assert {f.id for f in found} | {s.id for s in skipped} <= set(data[top])

"""Each app's MCP config as the app writes it (fixtures/), read where the app keeps it, with the
app's own variables filled in; and the bad input real users' files hold."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from sidecar.mcp_host.app_configs import ConfigError, Found, discover, read

FIXTURES = Path(__file__).parent / "fixtures"
ALICE = "/home/alice"


def place(fixture: str, dest: Path, home: Path) -> Path:
    """A fixture at `dest`, its /home/alice made the test's home."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text((FIXTURES / fixture).read_text().replace(ALICE, str(home)))
    return dest


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    for name in ("API_BASE_URL", "API_KEY", "DB_PATH", "LOG_LEVEL", "MY_SERVICE_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    return home


def by_id(found: list[Found]) -> dict[str, Found]:
    return {f.id: f for f in found}


def test_claude_desktop(home: Path):
    found, warnings = read(place("claude_desktop/claude_desktop_config.json", home / "c.json", home))
    servers = by_id(found)
    assert servers["filesystem"].args == ["-y", "@modelcontextprotocol/server-filesystem",
                                          f"{home}/Desktop", f"{home}/Downloads"]
    assert (servers["fetch"].command, servers["fetch"].args) == ("uvx", ["mcp-server-fetch"])
    assert servers["brave-search"].env == {"BRAVE_API_KEY": "BSAqwertyuiop1234567890"}
    assert all(f.source == "claude" and f.cwd is None for f in found) and warnings == []


def test_claude_code_user_project_and_shared_servers(home: Path):
    webapp = home / "src" / "webapp"
    (webapp / "bin").mkdir(parents=True)
    (webapp / "bin" / "dev-mcp").write_text("#!/bin/sh\n")
    place("claude_code/.claude.json", home / ".claude.json", home)
    place("claude_code/webapp/.mcp.json", webapp / ".mcp.json", home)

    found, skipped, warnings = discover(None)
    servers = by_id(found)
    # ~/.claude.json: user servers, then each project's own (with the project as its folder).
    assert servers["memory"].source == "claudeCode" and servers["sentry"].type == "streamable-http"
    assert any("also configured in" in w and "webapp" in w for w in servers["memory"].warnings)
    assert servers["postgres"].args[-1] == "postgresql://localhost/webapp_dev"
    assert servers["postgres"].cwd == str(webapp) and servers["postgres"].project == str(webapp)
    # Another project's different "postgres" is renamed for its project, not dropped.
    assert servers["postgres-gone"].args[-1] == "postgresql://localhost/gone"
    assert any("renamed from 'postgres'" in w for w in servers["postgres-gone"].warnings)

    # The project's .mcp.json, found through the projects Claude Code knows: ${VAR:-default}.
    api = servers["api-server"]
    assert api.url == "https://api.example.com/mcp" and api.headers == {"Authorization": "Bearer ${API_KEY}"}
    assert any("API_BASE_URL is not set" in w for w in api.warnings)
    dev = servers["dev-tools"]
    assert dev.command == str(webapp / "bin" / "dev-mcp") and dev.cwd == str(webapp)
    assert dev.args == ["--db", "./data/dev.sqlite"] and dev.env == {"LOG_LEVEL": "info"}
    # A whole shell line in command: split, and said so; a pipe cannot be split, and is skipped.
    assert (servers["quick"].command, servers["quick"].args) == ("npx", ["-y", "@modelcontextprotocol/server-everything"])
    assert any("was split into the program 'npx'" in w for w in servers["quick"].warnings)
    piped = next(s for s in skipped if s.id == "piped")
    assert "shell line" in piped.reason and '"sh"' in piped.reason and piped.path == str(webapp / ".mcp.json")
    assert warnings == []


def test_claude_code_defaults_give_way_to_variables_that_are_set(home: Path, monkeypatch: pytest.MonkeyPatch):
    webapp = home / "webapp"
    path = place("claude_code/webapp/.mcp.json", webapp / ".mcp.json", home)
    monkeypatch.setenv("API_BASE_URL", "https://staging.example.com")
    found, _ = read(path, known=lambda name: name in os.environ or name == "LOG_LEVEL")
    servers = by_id(found)
    assert servers["api-server"].url == "${API_BASE_URL}/mcp"  # resolved when it connects, never copied
    assert servers["dev-tools"].env == {"LOG_LEVEL": "${LOG_LEVEL}"}  # a stored secret counts as set


def test_vscode_user_file(home: Path):
    path = place("vscode/user/mcp.json", home / ".config" / "Code" / "User" / "mcp.json", home)
    found, skipped, _ = discover(path)
    servers = by_id(found)
    assert servers["github"].type == "streamable-http" and servers["github"].url == "https://api.githubcopilot.com/mcp/"
    assert servers["notes"].command == f"{home}/.local/bin/notes-mcp"
    assert servers["notes"].args == ["--dir", f"{home}{os.sep}notes"]
    # A user file belongs to no workspace: skipped, saying how to import it...
    assert [(s.id, "preview it again with project" in s.reason) for s in skipped] == [("scratch", True)]
    # ... which is with the project ${workspaceFolder} should mean (it still starts where it is told).
    scratch = by_id(discover(path, home / "site")[0])["scratch"]
    assert scratch.args == [f"{home}/site/server.js"] and scratch.cwd is None and scratch.project is None


def test_vscode_workspace_file_with_inputs(home: Path):
    workspace = home / "work"
    path = place("vscode/workspace/.vscode/mcp.json", workspace / ".vscode" / "mcp.json", home)
    found, _ = read(path)
    servers = by_id(found)
    ppl = servers["Perplexity"]
    assert ppl.env == {"PERPLEXITY_API_KEY": "${PERPLEXITY_KEY}"}
    assert [(i.name, i.prompt_id, i.description, i.password) for i in ppl.inputs] == [
        ("PERPLEXITY_KEY", "perplexity-key", "Perplexity API Key", True)]
    assert any("'Perplexity API Key'" in w and "PERPLEXITY_KEY with secrets/set" in w for w in ppl.warnings)
    local = servers["myLocal"]
    assert local.args == [f"{workspace}/tools/mcp/index.js"] and local.cwd == str(workspace)
    assert local.env == {"HOME_DIR": "${HOME}"}
    assert any("envFile is not read" in w for w in local.warnings)
    assert servers["events"].type == "sse" and all(f.source == "vscode" for f in found)


def test_cursor_global_and_project(home: Path):
    place("cursor/home/.cursor/mcp.json", home / ".cursor" / "mcp.json", home)
    project = home / "shop"
    place("cursor/project/.cursor/mcp.json", project / ".cursor" / "mcp.json", home)
    found, _, _ = discover(None, project)
    servers = by_id(found)
    assert {f.source for f in found} == {"cursor"}
    assert servers["linear"].type == "sse" and servers["remote"].type == "streamable-http"
    assert servers["remote"].headers == {"API_KEY": "${MY_SERVICE_TOKEN}"}
    assert servers["server-name"].project is None and servers["server-name"].cwd is None
    local = servers["local-server"]
    assert local.args == [f"{project}/mcp_server.py"] and local.env == {"PROJECT_NAME": "shop"}
    assert local.cwd == str(project)


def test_windsurf(home: Path):
    place("windsurf/mcp_config.json", home / ".codeium" / "windsurf" / "mcp_config.json", home)
    found, _, _ = discover(None)
    servers = by_id(found)
    assert servers["github"].env == {"GITHUB_PERSONAL_ACCESS_TOKEN": "${GITHUB_PERSONAL_ACCESS_TOKEN}"}
    figma = servers["figma"]
    assert (figma.type, figma.url) == ("streamable-http", "https://mcp.figma.example/mcp")  # serverUrl
    assert figma.headers == {"Authorization": "Bearer ${FIGMA_TOKEN}"}
    assert [i.name for i in figma.inputs] == ["FIGMA_TOKEN"]
    assert any("figma-token" in w and "FIGMA_TOKEN with secrets/set" in w for w in figma.warnings)
    assert servers["git"].enabled is False and servers["github"].enabled is True


def test_zed_both_command_shapes_remote_and_extensions(home: Path):
    place("zed/settings.json", home / ".config" / "zed" / "settings.json", home)
    found, skipped, warnings = discover(None)
    servers = by_id(found)
    assert (servers["hexdocs-mcp"].command, servers["hexdocs-mcp"].args) == ("npx", ["-y", "hexdocs-mcp@0.5.0"])
    git = servers["git"]  # the older {"command": {"path", "args", "env"}} shape
    assert (git.command, git.args, git.env) == ("uvx", ["mcp-server-git"], {"GIT_PAGER": "cat"})
    assert servers["docs"].type == "streamable-http" and servers["docs"].headers == {"X-Team": "docs"}
    assert servers["time"].enabled is False
    assert [(s.id, "extension" in s.reason) for s in skipped] == [("mcp-server-github", True)]
    assert warnings == [] and {f.source for f in found} == {"zed"}


def test_goose_extensions(home: Path):
    place("goose/config.yaml", home / ".config" / "goose" / "config.yaml", home)
    found, skipped, _ = discover(None)
    servers = by_id(found)
    assert (servers["fetch"].command, servers["fetch"].args) == ("uvx", ["mcp-server-fetch"])
    github = servers["github"]
    assert (github.type, github.url, github.enabled) == ("streamable-http", "https://api.githubcopilot.com/mcp/", False)
    assert github.env == {"GITHUB_PERSONAL_ACCESS_TOKEN": "${GITHUB_PERSONAL_ACCESS_TOKEN}"}
    assert servers["tavily"].env == {"TAVILY_LOG": "warn", "TAVILY_API_KEY": "${TAVILY_API_KEY}"}
    assert servers["events"].type == "sse" and servers["events"].url == "http://localhost:8000/sse"
    assert [s.id for s in skipped] == ["developer"] and "runs inside goose" in skipped[0].reason


def test_every_app_is_found_where_it_keeps_its_file_and_one_name_never_costs_the_rest(home: Path):
    config = home / ".config"
    place("claude_desktop/claude_desktop_config.json", config / "Claude" / "claude_desktop_config.json", home)
    place("claude_code/.claude.json", home / ".claude.json", home)
    place("vscode/user/mcp.json", config / "Code" / "User" / "mcp.json", home)
    place("cursor/home/.cursor/mcp.json", home / ".cursor" / "mcp.json", home)
    place("windsurf/mcp_config.json", home / ".codeium" / "windsurf" / "mcp_config.json", home)
    place("zed/settings.json", config / "zed" / "settings.json", home)
    place("goose/config.yaml", config / "goose" / "config.yaml", home)
    found, _, warnings = discover(None)
    assert {f.source for f in found} == {"claude", "claudeCode", "vscode", "cursor", "windsurf", "zed", "goose"}
    servers = by_id(found)
    assert len(servers) == len(found)
    # "fetch" is in Claude Desktop and goose as the same command, "github" in VS Code and goose as the
    # same remote server: each offered once. Windsurf's "github" runs a local one: kept, renamed.
    assert [f.source for f in found if f.command == "uvx" and f.args == ["mcp-server-fetch"]] == ["claude"]
    assert servers["github"].source == "vscode" and any("goose" in w for w in servers["github"].warnings)
    assert servers["github-windsurf"].command == "npx" and "github-goose" not in servers
    assert warnings == []


def test_a_50_mb_config_is_refused_unread_and_the_other_apps_still_offered(home: Path):
    big = home / ".cursor" / "mcp.json"
    big.parent.mkdir(parents=True)
    with big.open("wb") as f:
        f.truncate(50 << 20)  # sparse: 50 MB that reading would have to go through
    place("zed/settings.json", home / ".config" / "zed" / "settings.json", home)
    started = time.monotonic()
    found, _, warnings = discover(None)
    assert time.monotonic() - started < 5  # a read of 50 MB of JSON would take far longer than a refusal
    assert [w for w in warnings if str(big) in w] == [f"{big} is larger than 1 MiB (50 MiB); not an MCP config"]
    assert {f.source for f in found} == {"zed"}
    with pytest.raises(ConfigError, match="larger than 1 MiB"):
        discover(big)
    state = home / ".claude.json"
    shutil.copy(big, state)
    with pytest.raises(ConfigError, match=r"\.claude\.json is larger than 16 MiB \(50 MiB\)"):
        discover(state)


def test_a_claude_json_of_many_projects_is_read_fast_and_says_what_it_left_out(home: Path):
    projects = {f"{home}/src/p{i}": {"history": [{"display": "x" * 200, "pastedContents": {}}] * 40,
                                      "mcpServers": {"pg": {"command": "npx", "args": ["-y", "pg", f"db{i}"]}}}
                for i in range(800)}
    state = home / ".claude.json"
    state.write_text(json.dumps({"mcpServers": {}, "projects": projects}))  # ~8 MiB, as a long-used one grows
    found, _, warnings = discover(state)
    assert len(found) == 200 and found[1].id == "pg-p1" and found[1].cwd == f"{home}/src/p1"
    assert warnings == [f"{state} lists 800 projects; the servers of the first 200 are offered "
                        "(import a project's own with project)"]


def test_relative_commands_resolve_in_their_project_and_are_refused_elsewhere(home: Path):
    user = home / "c.json"
    user.write_text('{"mcpServers": {"rel": {"command": "./server"}, "bare": {"command": "python3"},'
                    ' "tilde": {"command": "~/bin/srv"}, "cwd": {"command": "x", "cwd": "sub"}}}')
    found, warnings = read(user)
    assert [w for w in warnings if "'rel'" in w] == [
        f"{user}: 'rel' skipped: command './server' is a relative path, and this file belongs to no project "
        "it could be relative to; give the program's absolute path"]
    servers = by_id(found)
    assert servers["bare"].command == "python3" and servers["tilde"].command == f"{home}/bin/srv"
    assert "cwd" not in servers and any("cwd 'sub' is a relative path" in w for w in warnings)
    project = home / "proj"
    shared = project / ".mcp.json"
    shared.parent.mkdir()
    shared.write_text('{"mcpServers": {"rel": {"command": "tools/../server", "cwd": "sub"}}}')
    rel = read(shared)[0][0]
    assert (rel.command, rel.cwd) == (str(project / "server"), str(project / "sub"))
    assert any("(which does not exist)" in w for w in rel.warnings)


@pytest.mark.parametrize("command, split", [
    ("npx -y @modelcontextprotocol/server-memory", ("npx", ["-y", "@modelcontextprotocol/server-memory", "x"])),
    ('uvx "mcp server" --flag', ("uvx", ["mcp server", "--flag", "x"])),
])
def test_a_shell_line_in_command_is_split(home: Path, command: str, split: tuple[str, list[str]]):
    path = home / "c.json"
    path.write_text('{"mcpServers": {"s": {"command": %s, "args": ["x"]}}}' % json.dumps(command))
    (found,), _ = read(path)
    assert (found.command, found.args) == split


@pytest.mark.parametrize("command", ["npx foo > log.txt", "a && b", "run $HOME/x", "echo $(id)", 'npx "unclosed'])
def test_a_shell_line_only_a_shell_can_run_is_skipped_with_why(home: Path, command: str):
    path = home / "c.json"
    path.write_text('{"mcpServers": {"s": {"command": %s}, "ok": {"command": "npx"}}}'
                    % json.dumps(command))
    found, warnings = read(path)
    assert [f.id for f in found] == ["ok"] and len(warnings) == 1 and "shell line" in warnings[0]


def test_a_program_whose_path_has_spaces_is_not_split(home: Path):
    program = home / "My Apps" / "server"
    program.parent.mkdir()
    program.write_text("")
    path = home / "c.json"
    path.write_text('{"mcpServers": {"s": {"command": "%s"}}}' % program)
    (found,), _ = read(path)
    assert (found.command, found.args, found.warnings) == (str(program), [], [])


def test_vscode_and_zed_jsonc_with_comments_and_trailing_commas(home: Path):
    path = home / ".config" / "zed" / "settings.json"
    path.parent.mkdir(parents=True)
    path.write_text('// top\n{"context_servers": {/* c */ "a": {"command": "x", "args": ["//not", "y",],},},}\n')
    (found,), _ = read(path)
    assert (found.source, found.args) == ("zed", ["//not", "y"])


@pytest.mark.parametrize("text, says", [
    ("extensions: [unclosed", "not valid YAML (line 2)"),
    ("- a list", "holds list"),
    ("extensions: " + "[" * 100 + "]" * 100, "nested more than 64"),
    ("other: 1", "no extensions object"),
])
def test_goose_files_that_are_not_goose_configs_say_so(home: Path, text: str, says: str):
    path = home / "config.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=says.replace("(", r"\(").replace(")", r"\)")):
        read(path)


def test_an_unknown_variable_is_left_for_the_user_with_a_warning(home: Path):
    path = home / ".vscode" / "mcp.json"
    path.parent.mkdir()
    path.write_text('{"servers": {"s": {"command": "x", "args": ["${config:editor.tabSize}", "${/}"]}}}')
    (found,), _ = read(path)
    assert found.args == ["${config:editor.tabSize}", os.sep]
    assert any("only the app itself can fill in" in w for w in found.warnings)


@pytest.mark.parametrize("platform, expected", [
    ("darwin", {"claude": "Library/Application Support/Claude/claude_desktop_config.json",
                "vscode": "Library/Application Support/Code/User/mcp.json", "zed": ".config/zed/settings.json",
                "goose": ".config/goose/config.yaml"}),
    ("win32", {"claude": "AppData/Roaming/Claude/claude_desktop_config.json",
               "vscode": "AppData/Roaming/Code/User/mcp.json", "zed": "AppData/Roaming/Zed/settings.json",
               "goose": "AppData/Roaming/Block/goose/config/config.yaml"}),
    ("linux", {"claude": ".config/Claude/claude_desktop_config.json", "vscode": ".config/Code/User/mcp.json",
               "zed": ".config/zed/settings.json", "goose": ".config/goose/config.yaml"}),
])
def test_each_app_is_looked_for_where_it_keeps_its_file_on_each_os(home: Path, monkeypatch: pytest.MonkeyPatch,
                                                                     platform: str, expected: dict[str, str]):
    from sidecar.mcp_host import app_formats

    monkeypatch.setattr(app_formats.sys, "platform", platform)
    monkeypatch.setenv("APPDATA", str(home / "AppData" / "Roaming"))
    monkeypatch.delenv("XDG_CONFIG_HOME")
    places: dict[str, list[str]] = {}
    for p in app_formats.default_places():
        places.setdefault(p.source, []).append(p.path.relative_to(home).as_posix())
    for source, path in expected.items():
        assert places[source][0] == path
    assert places["claudeCode"] == [".claude.json"] and places["cursor"] == [".cursor/mcp.json"]
    assert places["windsurf"] == [".codeium/windsurf/mcp_config.json"]

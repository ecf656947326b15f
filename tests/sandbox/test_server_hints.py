"""What a sandboxed MCP server's error adds when the sandbox stopped it at start (hints.server_hint),
and what the sandbox shows a server started from a script (mcp_host/server_files.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sidecar.mcp_host import server_files
from sidecar.sandbox.hints import server_hint
from sidecar.sandbox.policy import Confinement


@pytest.fixture
def hidden(tmp_path: Path) -> Path:
    path = tmp_path / "elsewhere" / "server.js"
    path.parent.mkdir()
    path.write_text("")
    return path


@pytest.mark.parametrize("said", [
    "python3: can't open file '{p}': [Errno 2] No such file or directory",
    "Error: Cannot find module '{p}'\n    at Module._resolveFilename (node:internal/modules/cjs/loader:1140:15)",
    "Error: ENOENT: no such file or directory, open '{p}'",
    "PermissionError: [Errno 13] Permission denied: '{p}'",
    "bwrap: execvp {p}: No such file or directory",
    "/bin/sh: 1: {p}: not found",
])
def test_a_file_the_sandbox_hid_is_named_with_the_keys_that_show_it(hidden: Path, said: str):
    hint = server_hint(said.format(p=hidden), Confinement(), "bubblewrap", shown=["/usr"])
    assert hint is not None and f"{hidden} is outside the server's sandbox" in hint
    assert "cwd" in hint and "sandbox.writable" in hint


def test_no_hint_for_what_the_sandbox_shows_or_what_does_not_exist(hidden: Path, tmp_path: Path):
    said = f"python3: can't open file '{hidden}': [Errno 2] No such file or directory"
    assert server_hint(said, Confinement(), "landlock", shown=[str(hidden.parent)]) is None
    assert server_hint(said, Confinement(writable=(str(tmp_path),)), "landlock", shown=[]) is None
    typo = "python3: can't open file '/no/such/folder/x.py': [Errno 2] No such file or directory"
    assert server_hint(typo, Confinement(), "landlock", shown=[]) is None  # a plain typo: no sandbox hint


def test_writes_and_connections_the_sandbox_refused_name_their_keys():
    assert "sandbox.writable" in (server_hint("OSError: [Errno 30] Read-only file system: '/srv/x'", Confinement(),
                                              "bubblewrap", shown=[]) or "")
    refused = server_hint("npm ERR! code EAI_AGAIN\nnpm ERR! request to https://registry.npmjs.org/x failed",
                          Confinement(), "bubblewrap", shown=[])
    assert refused is not None and "sandbox.network" in refused and "this server" in refused
    assert server_hint("npm ERR! code EAI_AGAIN", Confinement(network="full"), "bubblewrap", shown=[]) is None


def test_a_script_shows_its_project_never_the_home_folder_or_the_data_directory(tmp_path: Path,
                                                                                monkeypatch: pytest.MonkeyPatch):
    project = tmp_path / "proj"
    (project / "dist").mkdir(parents=True)
    (project / "package.json").write_text("{}")
    script = project / "dist" / "index.js"
    script.write_text("")
    loose = tmp_path / "loose" / "server.py"
    loose.parent.mkdir()
    loose.write_text("")
    shown = server_files.readable("/usr/bin/node", [str(script), f"--extra={loose}"], None)
    assert str(project) in shown and str(loose.parent) in shown

    monkeypatch.setenv("HOME", str(tmp_path))
    at_home = tmp_path / "server.py"
    at_home.write_text("")
    shown = server_files.readable("/usr/bin/python3", [str(at_home)], str(tmp_path))
    assert str(at_home) in shown and str(tmp_path) not in shown  # the file alone, never the whole home
    data = tmp_path / "work" / "data"
    data.mkdir(parents=True)
    beside = tmp_path / "work" / "server.py"
    beside.write_text("")
    shown = server_files.readable("/usr/bin/python3", [str(beside)], None, private=[str(data)])
    assert shown == sorted({"/usr/bin", os.path.dirname(os.path.realpath("/usr/bin/python3")), str(beside)})

"""Sandboxed stdio servers that start: the script a server is given (and the project it sits in) is
readable inside its sandbox without a cwd; one the sandbox stops at start says what it could not
reach and which ``sandbox`` key widens it; mcpServers/add warns before it starts when the sandbox
will hide what its declaration names."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from sidecar.client import SidecarClient
from tests.e2e.test_mcp import FIXTURES, status

pytestmark = pytest.mark.anyio


def project(root: Path) -> Path:
    """A server as people keep one: ``proj/src/server.py`` importing a neighbour, ``proj/pyproject.toml``."""
    (root / "proj" / "src").mkdir(parents=True)
    (root / "proj" / "pyproject.toml").write_text("[project]\nname = 'proj'\n")
    (root / "proj" / "src" / "neighbour.py").write_text("GREETING = 'hello from the project'\n")
    body = (FIXTURES / "basic.py").read_text()
    server = root / "proj" / "src" / "server.py"
    # A script imports what lies beside it.
    server.write_text(body.replace("from __future__ import annotations\n",
                                   "from __future__ import annotations\n\nimport neighbour  # noqa: F401\n", 1))
    return server


async def test_a_sandboxed_script_server_starts_without_a_cwd(mechanism: str, outer_dir: Path):
    server = project(outer_dir)
    async with SidecarClient.spawn(outer_dir / "data", args=("--sandbox", mechanism)) as sc:
        added = (await sc.request("mcpServers/add", {"id": "proj", "command": sys.executable,
                                                     "args": [str(server)], "sandbox": {}}))["server"]
        assert "warnings" not in added, added["warnings"]
        started = await status(sc, "proj~proj", "connected", "error", timeout=60)
        assert started["status"] == "connected", started["error"]
        assert started["confinedBy"] == mechanism
        # Read-only: the project is shown, not handed over.
        done = (await sc.request("tools/call", {"toolId": "mcp:proj~proj:env", "args": {"name": "HOME"}}))["toolCall"]
        assert done["status"] == "success"


async def test_a_server_the_sandbox_stops_at_start_says_what_and_which_key(mechanism: str, outer_dir: Path):
    hidden = outer_dir / "elsewhere" / "settings.json"
    hidden.parent.mkdir()
    hidden.write_text("{}")
    script = outer_dir / "tool" / "reads_settings.py"
    script.parent.mkdir()
    script.write_text("import os\nopen(os.environ['SETTINGS']).read()\n")
    async with SidecarClient.spawn(outer_dir / "data", args=("--sandbox", mechanism)) as sc:
        await sc.request("mcpServers/add", {"id": "cfg", "command": sys.executable, "args": [str(script)],
                                            "env": {"SETTINGS": str(hidden)}, "sandbox": {}})
        failed = await status(sc, "cfg~cfg", "error", timeout=60)
        # (The path itself is masked here: the test folder's random name looks like a token.)
        assert "is outside the server's sandbox" in failed["error"], failed["error"]
        assert "sandbox.writable" in failed["error"] and "cwd" in failed["error"]
        # The same server unconfined starts past that line (and ends: it is no MCP server), without the hint.
        await sc.request("mcpServers/update", {"id": "cfg", "sandbox": None})
        plain = await status(sc, "cfg~cfg", "error", timeout=60)
        assert "outside the server's sandbox" not in plain["error"], plain["error"]


async def test_add_warns_when_the_sandbox_will_hide_what_the_server_is_given(app: SidecarClient, tmp_path: Path):
    folder = tmp_path / "notes"
    folder.mkdir()
    basic = str(FIXTURES / "basic.py")
    boxed = (await app.request("mcpServers/add", {"id": "fs", "command": sys.executable,
                                                  "args": [basic, str(folder)], "sandbox": {}}))["server"]
    assert any(f"args[1] {folder} is a folder the sandbox does not show" in w and "sandbox.writable" in w
               for w in boxed["warnings"]), boxed
    plain = (await app.request("mcpServers/add", {"id": "fs2", "command": sys.executable,
                                                  "args": [basic, str(folder)]}))["server"]
    assert "warnings" not in plain  # unconfined, it sees what the user sees
    widened = (await app.request("mcpServers/update", {"id": "fs", "sandbox": {"writable": [str(folder)]}}))["server"]
    assert "warnings" not in widened, widened
    if shutil.which("npx") is not None:
        npx = (await app.request("mcpServers/add", {"id": "mem", "command": "npx", "sandbox": {},
                                                    "args": ["-y", "@modelcontextprotocol/server-memory"]}))["server"]
        assert any("npx downloads the server" in w and "sandbox.network" in w for w in npx["warnings"]), npx

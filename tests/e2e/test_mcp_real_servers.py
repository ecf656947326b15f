"""The servers people run, as they get them: the npm reference servers through ``npx -y`` and the PyPI
ones through ``uvx``, from the registries, with this machine's certificate and proxy settings in
effect, imported from a Claude Desktop config (mcpServers/importPreview + mcpServers/import) into the
real sidecar, and one tool of each driven through it.

One test on purpose: two pytest workers running ``npx -y`` for the same package at once would race
on npm's shared cache (the very breakage issue 29 names). The registries' caches are warmed first,
by the same runners with the same environment, under a generous scaled deadline: the sidecar's own
first connect gives a server 30 s (an install budget of minutes is another branch's work), and a
cold first download takes 25-85 s here. fetch reaches only a local HTTP server.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest

from sidecar.children import scrubbed_env
from sidecar.client import SidecarClient
from tests.http_server import HttpServer, Response
from tests.timing import scaled

pytestmark = pytest.mark.anyio

NPM = ("@modelcontextprotocol/server-filesystem", "@modelcontextprotocol/server-memory",
       "@modelcontextprotocol/server-everything", "@modelcontextprotocol/server-sequential-thinking")
PYPI = ("mcp-server-fetch", "mcp-server-git", "mcp-server-time")
INSTALL = 600.0  # seconds one first download may take on a slow machine, before scaling


def _warm(argv: list[str], env: dict[str, str]) -> str | None:
    """Run a package runner once so its package is in the cache; why it failed, or None."""
    try:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, env=env,
                              timeout=scaled(INSTALL), check=False)
    except subprocess.TimeoutExpired:
        return f"{' '.join(argv)} did not finish within {scaled(INSTALL):g} s"
    return None if done.returncode == 0 else f"{' '.join(argv)}: {done.stderr.decode(errors='replace')[-800:]}"


def claude_config(root: Path) -> Path:
    files = root / "files"
    files.mkdir()
    (files / "hello.txt").write_text("hello from the filesystem server\n")
    repo = root / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q"], check=True)
    (repo / "README.md").write_text("x\n")
    subprocess.run([*git, "add", "README.md"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "first"], check=True)
    servers: dict[str, Any] = {
        "filesystem": {"command": "npx", "args": ["-y", NPM[0], str(files)]},
        "memory": {"command": "npx", "args": ["-y", NPM[1]], "env": {"MEMORY_FILE_PATH": str(root / "memory.jsonl")}},
        "everything": {"command": "npx", "args": ["-y", NPM[2]]},
        "thinking": {"command": "npx", "args": ["-y", NPM[3]]},
        "fetch": {"command": "uvx", "args": [PYPI[0], "--ignore-robots-txt", "--allow-private-ips"]},
        "git": {"command": "uvx", "args": [PYPI[1], "--repository", str(repo)]},
        "time": {"command": "uvx", "args": [PYPI[2], "--local-timezone", "UTC"]},
    }
    path = root / "claude_desktop_config.json"
    path.write_text(json.dumps({"mcpServers": servers}, indent=2))
    return path


async def connected(sc: SidecarClient, key: str) -> dict[str, Any]:
    """The server once a status event says it connected (or failed: then the test says why)."""
    def settled() -> dict[str, Any] | None:
        for n in reversed(sc.notifications):
            server = n.get("params", {}).get("server", {}) if n.get("method") == "mcpServers/status" else {}
            if server.get("id") == key and server.get("status") in ("connected", "error"):
                return server
        return None

    server = await sc.wait_for(settled, timeout=120)
    assert server["status"] == "connected", f"{key}: {server.get('error')}"
    return server


async def call(sc: SidecarClient, key: str, tool: str, args: dict[str, Any]) -> str:
    done = (await sc.request("tools/call", {"toolId": f"mcp:{key}:{tool}", "args": args},
                             timeout=scaled(120)))["toolCall"]
    assert done["status"] == "success", (done.get("error"), done.get("errorKind"))
    return json.dumps(done["result"])


async def test_the_servers_people_run_install_import_connect_and_answer(tmp_path: Path, data_dir: Path):
    missing = [name for name in ("npx", "uvx", "git") if shutil.which(name) is None]
    if missing:
        pytest.skip(f"{' and '.join(missing)} not on PATH: the real npm and PyPI servers cannot be run here")
    # The runners see what a server will see: the sidecar's allow-list of this machine's settings.
    env = scrubbed_env(package_runners=True)
    for argv in ([*("npx", "-y", "--package"), p, "--", "node", "-e", "0"] for p in NPM):
        if (why := await anyio.to_thread.run_sync(_warm, argv, env)) is not None:
            pytest.skip(f"the npm registry could not be used here: {why}")
    for package in PYPI:
        if (why := await anyio.to_thread.run_sync(_warm, ["uvx", "--from", package, "python", "-c", "0"], env)):
            pytest.skip(f"PyPI could not be used here: {why}")

    with HttpServer() as site:
        page = b"<html><body><h1>Local page</h1><p>served for fetch</p></body></html>"
        site.route("GET", "/page", Response(200, headers={"Content-Type": "text/html"}, body=page))
        config = claude_config(tmp_path)
        local = {"NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}
        async with SidecarClient.spawn(data_dir, env=local) as sc:
            preview = await sc.request("mcpServers/importPreview", {"path": str(config)})
            ids = sorted(s["id"] for s in preview["servers"])
            assert ids == ["everything", "fetch", "filesystem", "git", "memory", "thinking", "time"], preview
            imported = await sc.request("mcpServers/import", {"path": str(config), "ids": ids})
            assert sorted(s["serverId"] for s in imported["servers"]) == ids
            certificates = {n for n in ("SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS") if n in os.environ}
            for s in imported["servers"]:  # names only, and the machine's certificate settings among them
                assert certificates <= set(s["envNames"]), s

            for key in (f"{i}~{i}" for i in ids):
                await connected(sc, key)
            assert "hello from the filesystem server" in await call(
                sc, "filesystem~filesystem", "read_text_file", {"path": str(tmp_path / "files" / "hello.txt")})
            assert "Ada" in await call(sc, "memory~memory", "create_entities", {"entities": [
                {"name": "Ada", "entityType": "person", "observations": ["wrote the first program"]}]})
            assert "ping from the sidecar" in await call(sc, "everything~everything", "echo",
                                                         {"message": "ping from the sidecar"})
            assert "thoughtNumber" in await call(sc, "thinking~thinking", "sequentialthinking", {
                "thought": "one step", "thoughtNumber": 1, "totalThoughts": 1, "nextThoughtNeeded": False})
            assert "Local page" in await call(sc, "fetch~fetch", "fetch", {"url": f"{site.url}/page"})
            assert any(r.path == "/page" for r in site.requests)
            assert "first" in await call(sc, "git~git", "git_log", {"repo_path": str(tmp_path / "repo")})
            assert "UTC" in await call(sc, "time~time", "get_current_time", {"timezone": "UTC"})

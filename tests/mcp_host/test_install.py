"""A package runner's first start (issue 29, part 2): installing with progress, a bounded install
budget, a gentle stop, retries, mcpServers/prepare and npx's shared install folder.

The deterministic cases run tests/fixtures/mcp/fake_runner.py behind a wrapper named ``npx`` (a real
subprocess that installs on stderr, then serves MCP with basic.py); every wait is on the host's own
status notifications. test_npx_killed_mid_install_is_repaired_at_next_start uses the real npx
against the npm registry.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from sidecar.errors import UpstreamError
from sidecar.mcp_host import McpHost, ServerConfig, ServerState, npx_cache
from sidecar.mcp_host.runners import recognise
from tests.timing import scaled

pytestmark = pytest.mark.anyio

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "mcp"
KEY = "ts~pkg"


def fake_npx(tmp_path: Path) -> str:
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    npx = folder / "npx"
    npx.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} "
                   f"{shlex.quote(str(FIXTURES / 'fake_runner.py'))} \"$@\"\n")
    npx.chmod(0o755)
    return str(npx)


def config(tmp_path: Path, command: str, env: dict[str, str], **kw: Any) -> ServerConfig:
    kw.setdefault("connect_timeout", scaled(15.0))
    kw.setdefault("install_timeout", scaled(60.0))
    return ServerConfig(server_id="pkg", toolset_id="ts", type="stdio", command=command,
                        args=kw.pop("args", ("-y", "fake-pkg")),
                        env={"npm_config_cache": str(tmp_path / "cache"), **env}, **kw)


class Watch:
    """Every status the host announces, and a way to wait for the next one that matches."""

    def __init__(self) -> None:
        self.states: list[ServerState] = []
        self._send, self._recv = anyio.create_memory_object_stream[ServerState](10_000)

    async def on_status(self, state: ServerState) -> None:
        self.states.append(state)
        self._send.send_nowait(state)

    async def until(self, test: Callable[[ServerState], bool], what: str, within: float = 60.0) -> ServerState:
        with anyio.move_on_after(scaled(within)):
            async for state in self._recv:
                if test(state):
                    return state
        pytest.fail(f"never saw {what}; saw {[(s.status, s.error) for s in self.states[-5:]]}")


@asynccontextmanager
async def hosting(*configs: ServerConfig, installs: Path | None = None) -> AsyncIterator[tuple[McpHost, Watch]]:
    watch = Watch()
    host = McpHost(on_status=watch.on_status, installs=installs)
    async with anyio.create_task_group() as tg:
        host.bind(tg)
        await host.sync(configs)
        try:
            yield host, watch
        finally:
            await host.aclose()
            tg.cancel_scope.cancel()


def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "gate"
    os.mkfifo(path)
    return path


async def open_gate(path: Path) -> None:
    await anyio.to_thread.run_sync(path.write_bytes, b"go")


@pytest.mark.parametrize(("command", "args", "runner", "package"), [
    ("npx", ["-y", "@modelcontextprotocol/server-memory"], "npx", "@modelcontextprotocol/server-memory"),
    ("/usr/bin/npx", ["--yes", "--package=@scope/pkg@1.2", "pkg-bin", "--flag"], "npx", "@scope/pkg@1.2"),
    ("npx.cmd", ["-y", "server-filesystem", "/tmp"], "npx", "server-filesystem"),
    ("uvx", ["--python", "3.12", "mcp-server-time", "--local-timezone", "UTC"], "uvx", "mcp-server-time"),
    ("uvx", ["--from", "git+https://example.com/repo", "serve"], "uvx", "git+https://example.com/repo"),
    ("uv", ["tool", "run", "mcp-server-fetch"], "uvx", "mcp-server-fetch"),
    ("pipx", ["run", "--spec", "mcp-server-git==1.0", "mcp-server-git"], "pipx", "mcp-server-git==1.0"),
    ("bunx", ["@scope/srv"], "bunx", "@scope/srv"),
    ("pnpm", ["dlx", "@scope/srv"], "pnpm", "@scope/srv"),
    ("docker", ["run", "-i", "--rm", "-e", "TOKEN", "ghcr.io/github/github-mcp-server"], "docker",
     "ghcr.io/github/github-mcp-server"),
])
def test_package_runners_are_recognised(command: str, args: list[str], runner: str, package: str) -> None:
    found = recognise(command, args)
    assert found is not None and (found.name, found.package) == (runner, package)


@pytest.mark.parametrize(("command", "args"), [
    ("python", ["server.py"]), ("node", ["dist/index.js"]), ("docker", ["ps"]), ("pipx", ["install", "x"]),
    ("pnpm", ["install"]), (None, []),
])
def test_programs_run_directly_are_not_runners(command: str | None, args: list[str]) -> None:
    assert recognise(command, args) is None


async def test_first_start_reports_installing_with_the_runners_progress(tmp_path: Path) -> None:
    gate = fifo(tmp_path)
    cfg = config(tmp_path, fake_npx(tmp_path), {"FAKE_LINES": "3", "FAKE_GATE": str(gate)},
                 connect_timeout=scaled(5.0))
    async with hosting(cfg) as (host, watch):
        state = await watch.until(lambda s: s.status == "installing" and s.install is not None
                                  and s.install.lines >= 3, "installing with three progress lines")
        assert state.install is not None and state.runner == "npx"
        assert state.install.package == "fake-pkg" and state.install.runner == "npx"
        assert state.install.message == "npm http fetch GET 200 fake-pkg part 2"
        assert state.install.budget_ms == int(scaled(60.0) * 1000)
        assert state.install.cache == str(npx_cache.install_dir(["fake-pkg"], {"npm_config_cache":
                                                                             str(tmp_path / "cache")}))
        # Longer than its connect timeout: the install budget holds the handshake open.
        await open_gate(gate)
        connected = await watch.until(lambda s: s.status == "connected", "connected")
        assert connected.install is None and connected.runner == "npx"
        result = await host.call_tool(KEY, "echo", {"text": "installed"})
        assert result["content"][0]["text"] == "installed"


async def test_an_install_past_its_budget_is_stopped_with_sigterm_and_retried(tmp_path: Path) -> None:
    mark = tmp_path / "term-mark"
    cfg = config(tmp_path, fake_npx(tmp_path), {"FAKE_GATE": str(fifo(tmp_path)), "FAKE_TERM_MARK": str(mark)},
                 connect_timeout=0.5, install_timeout=1.0)
    async with hosting(cfg) as (_host, watch):
        failed = await watch.until(lambda s: s.status == "error", "the budget's error")
        assert failed.error is not None
        assert "npx did not finish installing fake-pkg within 1 s (installTimeout raises it)" in failed.error
        assert "part 2" in failed.error  # what it last said
        # SIGTERM with time to clean up, not SIGKILL: its handler wrote the mark before the error.
        assert mark.read_text() == "cleaned"
        mark.unlink()
        await watch.until(lambda s: s.status == "installing", "a retry installing again")
        await watch.until(lambda s: s.status == "error", "the retry's error")
        assert mark.read_text() == "cleaned"


async def test_a_failed_first_start_is_retried_with_backoff(tmp_path: Path) -> None:
    cfg = config(tmp_path, fake_npx(tmp_path), {"FAKE_FAIL_ONCE": str(tmp_path / "failed")})
    async with hosting(cfg) as (host, watch):
        failed = await watch.until(lambda s: s.status == "error", "the first start's error")
        assert failed.error is not None and "exited with code 1" in failed.error
        assert "ECONNRESET" in failed.error
        await watch.until(lambda s: s.status == "connected", "the retry connected")
        assert (await host.call_tool(KEY, "add", {"a": 2, "b": 3}))["structuredContent"]["result"] == 5


async def test_megabytes_of_install_output_stay_bounded(tmp_path: Path) -> None:
    cfg = config(tmp_path, fake_npx(tmp_path), {"FAKE_LINES": "4000", "FAKE_LINE_BYTES": "2000"})
    async with hosting(cfg) as (host, watch):
        began = time.monotonic()
        await watch.until(lambda s: s.status == "connected", "connected after 8 MB of stderr")
        took = time.monotonic() - began
        installing = [s for s in watch.states if s.status == "installing"]
        assert installing, "the install was never reported"
        # Coalesced: about four a second however fast it prints (4,000 lines here), each line cut short.
        assert len(installing) <= 4 * took + 3
        assert all(s.install is not None and len(s.install.message or "") <= 300 for s in installing)


async def test_prepare_warms_a_disabled_server_and_says_why_it_failed(tmp_path: Path) -> None:
    cfg = config(tmp_path, fake_npx(tmp_path), {"FAKE_FAIL_ONCE": str(tmp_path / "failed")}, enabled=False)
    async with hosting(cfg) as (host, watch):
        with pytest.raises(UpstreamError) as failed:
            await host.prepare(KEY)
        assert "ECONNRESET" in str(failed.value)
        await host.prepare(KEY)  # the package "installed": a handshake done, then stopped
        assert host.state(KEY).status == "disabled"
        assert all(s.status == "disabled" for s in watch.states)


async def test_prepare_waits_for_an_enabled_server_to_finish_installing(tmp_path: Path) -> None:
    gate = fifo(tmp_path)
    cfg = config(tmp_path, fake_npx(tmp_path), {"FAKE_GATE": str(gate)})
    async with hosting(cfg) as (host, watch):
        await watch.until(lambda s: s.status == "installing", "installing")
        async with anyio.create_task_group() as tg:
            tg.start_soon(host.prepare, KEY)
            await open_gate(gate)
        assert host.state(KEY).status == "connected"


def _broken_npx_folder(tmp_path: Path) -> Path:
    """What a SIGKILLed npx leaves: its lock (untouched for a minute), no package.json, empty packages."""
    folder = npx_cache.install_dir(["fake-pkg"], {"npm_config_cache": str(tmp_path / "cache")})
    assert folder is not None
    (folder / "node_modules" / "fake-pkg").mkdir(parents=True)
    lock = folder / npx_cache.LOCK
    lock.mkdir()
    old = time.time() - 60
    os.utime(lock, (old, old))
    return folder


async def test_a_broken_npx_folder_someone_else_left_is_named_not_touched(tmp_path: Path) -> None:
    folder = _broken_npx_folder(tmp_path)
    async with hosting(config(tmp_path, fake_npx(tmp_path), {}), installs=tmp_path / "journal") as (_h, watch):
        state = await watch.until(lambda s: s.status == "installing", "installing")
        assert state.install is not None and state.install.note is not None
        assert "stale npx lock" in state.install.note and "not left by this app" in state.install.note
        assert f"remove {folder} " in state.install.note
        await watch.until(lambda s: s.status == "connected", "connected")
    assert (folder / npx_cache.LOCK).is_dir()


async def test_a_broken_npx_folder_of_our_own_start_is_repaired(tmp_path: Path) -> None:
    folder = _broken_npx_folder(tmp_path)
    journal = tmp_path / "journal"
    npx_cache.Journal(journal).begin(folder, KEY)  # an earlier start of ours, killed mid-install
    async with hosting(config(tmp_path, fake_npx(tmp_path), {}), installs=journal) as (_h, watch):
        state = await watch.until(lambda s: s.status == "installing", "installing")
        assert state.install is not None and state.install.note is not None
        assert state.install.note.startswith(f"removed a stale npx lock ({folder / npx_cache.LOCK}")
        assert not folder.exists()
        await watch.until(lambda s: s.status == "connected", "connected")


def _npx_mid_install(cache: Path, journal: Path) -> Path:
    """Start the real npx as the sidecar would (its journal note first), and SIGKILL its process group
    once it is unpacking tarballs, as the parent-death signal does when the sidecar is killed."""
    env = {**os.environ, "npm_config_cache": str(cache), "npm_config_loglevel": "http"}
    folder = npx_cache.install_dir(["@modelcontextprotocol/server-memory"], env)
    assert folder is not None
    npx_cache.before_start(folder, ["@modelcontextprotocol/server-memory"], npx_cache.Journal(journal), KEY)
    proc = subprocess.Popen([shutil.which("npx") or "npx", "-y", "@modelcontextprotocol/server-memory"],
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env=env, start_new_session=True)
    assert proc.stderr is not None
    for line in proc.stderr:  # waits on its own output: a tarball fetched means the install holds its lock
        if b".tgz" in line:
            break
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    return folder


@pytest.mark.skipif(shutil.which("npx") is None, reason="needs npx (Node.js) and the npm registry")
async def test_npx_killed_mid_install_is_repaired_at_next_start(tmp_path: Path) -> None:
    cache, journal = tmp_path / "cache", tmp_path / "journal"
    folder = await anyio.to_thread.run_sync(_npx_mid_install, cache, journal)
    # What the user's other apps would trip on: npx's lock left behind, and no finished install.
    assert (folder / npx_cache.LOCK).is_dir() and not (folder / "package.json").exists()
    cfg = config(tmp_path, shutil.which("npx") or "npx", {}, args=("-y", "@modelcontextprotocol/server-memory"),
                 install_timeout=scaled(300.0))
    async with hosting(cfg, installs=journal) as (host, watch):
        state = await watch.until(lambda s: s.status == "installing" and s.install is not None
                                  and s.install.note is not None, "installing with a repair note", within=120)
        assert state.install is not None and state.install.note is not None
        assert state.install.note.startswith("removed ")
        assert state.install.cache == str(folder)
        await watch.until(lambda s: s.status == "connected", "connected", within=330)
        result = await host.call_tool(KEY, "read_graph", {})
        assert not result.get("isError")
    assert npx_cache.inspect(folder, ["@modelcontextprotocol/server-memory"]).state == "complete"
    assert not list(journal.iterdir())  # the finished install ended the note

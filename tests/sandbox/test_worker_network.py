"""A Python tool's network through the worker pool: none, or only the allowed hosts (the egress proxy)."""

from __future__ import annotations

import textwrap
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from sidecar.sandbox.egress import Egress
from sidecar.sandbox.policy import Confinement
from sidecar.sandbox.runner import Sandbox
from sidecar.tools.providers.python.workers import Limits, ToolFailure, ToolsetWorkers
from tests.http_server import HttpServer, Response

pytestmark = pytest.mark.anyio

FETCH = '''
import urllib.request
from covalt_toolset import tool

@tool
def fetch(url: str) -> str:
    """The body at url."""
    with urllib.request.urlopen(url, timeout=10) as answer:
        return answer.read().decode()
'''


@pytest.fixture
async def pool(bwrap: str, tmp_path: Path) -> AsyncIterator[ToolsetWorkers]:
    folder = tmp_path / "fetcher"
    (folder / "tools").mkdir(parents=True)
    (folder / "tools" / "net.py").write_text(textwrap.dedent(FETCH))
    async with anyio.create_task_group() as tg:
        egress = Egress()
        egress.bind(tg)
        workers = ToolsetWorkers("fetcher", folder, Limits(), sandbox=Sandbox("bubblewrap", egress))
        yield workers
        await workers.aclose()
        await egress.aclose()
        tg.cancel_scope.cancel()


async def test_a_tool_reaches_only_its_allowed_host_and_nothing_without_network(
        pool: ToolsetWorkers, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    context = {"workspace": str(ws), "chatId": "c1", "toolCallId": "t1"}
    with HttpServer("127.0.0.1") as server, HttpServer("127.0.0.2") as other:
        server.route("GET", "/hello", Response(body=b"hello from the allowed host"))
        other.route("GET", "/hello", Response(body=b"never"))
        allowed = Confinement(network="allowedHosts", allowed_hosts=(f"127.0.0.1:{server.port}",))
        got = await pool.call("fetch", "tools.net:fetch", {"url": f"{server.url}/hello"}, context=context,
                              confinement=allowed)
        assert got == "hello from the allowed host"
        with pytest.raises(ToolFailure) as refused:
            await pool.call("fetch", "tools.net:fetch", {"url": f"{other.url}/hello"}, context=context,
                            confinement=allowed)
        assert "not in sandbox.allowedHosts" in refused.value.message
        with pytest.raises(ToolFailure) as offline:
            await pool.call("fetch", "tools.net:fetch", {"url": f"{server.url}/hello"}, context=context)
        assert "sandbox.network" in offline.value.message
        assert other.connections == 0
    assert len(pool.stats()["pids"]) == 2  # one worker per confinement

"""Relevance under what a catalog can throw at it, over the real services, a real MCP server and a
real SQLite file: a server that lists its tools again 100 times a second (only changed text is
embedded again, so: nothing), its 1 MB description, and many tools embedded in batches."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from sidecar.api.mcp import AddParams
from sidecar.compose import Services
from sidecar.embedding.model import EmbeddingModel
from sidecar.tools.relevance import WARM_FROM, Relevance
from tests.tools.search_helpers import Peer, built, install_into

pytestmark = pytest.mark.anyio

RELISTS = Path(__file__).resolve().parents[1] / "fixtures" / "mcp" / "relists.py"
KEY = "relists~relists"


async def _connected(services: Services, peer: Peer) -> None:
    await peer.until(lambda: services.mcp_servers.host.state(KEY).status in ("connected", "error"))
    assert services.mcp_servers.host.state(KEY).status == "connected"


async def top(services: Services, text: str, **kw: Any) -> list[str]:
    return [r.tool_id for r in await services.relevance.rank(text, limit=5, **kw)]


async def test_mcp_tools_rank_as_soon_as_listed_and_a_relisting_storm_embeds_nothing(tmp_path: Path):
    async with built(tmp_path / "data") as (services, peer):
        await services.mcp_servers.add(AddParams(id="relists", command=sys.executable, args=[str(RELISTS)]))
        await _connected(services, peer)
        # Its 1 MB description is embedded as its first part (mostly padding: its meaning is lost, its
        # words are not): ranked, and served in bounded time.
        assert (await top(services, "summarise a wombat burrow"))[0] == f"mcp:{KEY}:chatty"
        assert f"mcp:{KEY}:tool_007" in await top(services, "tool number 7 of this server")
        await services.relevance.settled()
        embedded, writes = services.relevance.embedded, services.db.transactions
        assert embedded == 52 + 5  # the server's tools and the built-ins, once each
        relisted = peer.counts.get("mcpServers/status", 0)
        ranked = 0
        done = False

        async def storm() -> None:
            nonlocal done
            await services.mcp_servers.host.call_tool(KEY, "storm", {"times": 100, "per_second": 100})
            done = True
            await peer.notify("test/stormOver")  # wakes the loop below

        async with anyio.create_task_group() as tg:
            tg.start_soon(storm)
            # A ranking after every re-list the UI hears of, while the server keeps re-listing.
            while not done:
                seen = peer.counts.get("mcpServers/status", 0)
                assert f"mcp:{KEY}:storm" in await top(services, "tell the client the tool list changed")
                ranked += 1
                await peer.until(lambda seen=seen: done or peer.counts.get("mcpServers/status", 0) > seen)
        assert peer.counts.get("mcpServers/status", 0) > relisted and ranked >= 10
        assert services.relevance.embedded == embedded  # the same texts: nothing embedded again
        assert services.db.transactions - writes <= 2  # (the call's own record, at most): no vector written


async def test_many_tools_are_embedded_in_batches_and_identical_text_once(tmp_path: Path):
    async with built(tmp_path / "data") as (services, _):
        tools = {f"tool_{i:03d}": f"Convert a temperature reading number {i} between units" for i in range(300)}
        await install_into(services, tmp_path / "src", "conv", tools)
        await install_into(services, tmp_path / "src2", "conv2", tools)  # the same names and text: shared vectors
        await services.relevance.settled()
        assert services.relevance.embedded == 300 + 5
        found = await top(services, "convert 30 degrees celsius to fahrenheit", mode="embedding")
        assert len(found) == 5 and all(t.startswith("conv") for t in found)
        only = await top(services, "convert degrees celsius", tool_ids=["conv2:tool_007", "read_file"])
        assert only == ["conv2:tool_007"]


async def test_the_model_is_loaded_unasked_only_for_a_catalog_a_turn_would_rank(tmp_path: Path):
    """Under WARM_FROM enabled tools a turn offers them all and nothing ranks: a sidecar that never
    needs the model does not pay its ~200 MB. From there on it is warm before the first turn."""
    async with built(tmp_path / "data") as (services, _):
        async def warmed() -> EmbeddingModel:
            model = EmbeddingModel.from_settings(None, None)
            relevance = Relevance(services.db, services.catalog, model, services.search.lexical)
            async with anyio.create_task_group() as tg:
                relevance.bind(tg, warm_after=0)
                await relevance.warmed.wait()
                tg.cancel_scope.cancel()  # (the embedding it started, if any: the model's state is known)
            return model

        assert (await warmed()).status().state != "loaded"  # the five built-ins only
        await install_into(services, tmp_path / "src", "many",
                           {f"tool_{i:02d}": f"Tool number {i} of a big kit" for i in range(WARM_FROM)})
        assert (await warmed()).status().state == "loaded"

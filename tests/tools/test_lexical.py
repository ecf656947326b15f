"""The lexical ranker (tools/ranking.py's lexical mode) over the real services and a real SQLite
file: bm25 with typo correction against the index's vocabulary, common words left out, scores in
[0, 1] and a reason worded for a user."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from sidecar.compose import Services
from tests.tools.search_helpers import built, install_into

pytestmark = pytest.mark.anyio

GIT = {
    "git_commit": "Record changes to the repository with a message",
    "git_log": "Shows the commit logs of a branch",
    "git_status": "Shows the working tree status",
}
WEATHER = {
    "get_weather": ("Current weather for a city", {"type": "object", "properties": {
        "city": {"type": "string", "description": "Name of the city"}}}),
    "stock_quote": "Latest price of a share on the market",
    "hello": "Say hello to someone",
    "calendar_events": "List the events of the user's calendar for a day",
}


@pytest.fixture
async def services(tmp_path: Path) -> AsyncIterator[Services]:
    async with built(tmp_path / "data") as (s, _):
        await install_into(s, tmp_path / "src", "git", GIT)
        await install_into(s, tmp_path / "src", "misc", WEATHER)
        yield s


async def top(services: Services, text: str, limit: int = 3, **kw: object) -> list[str]:
    return [r.tool_id for r in await services.search.lexical(text, limit=limit, **kw)]  # type: ignore[arg-type]


async def test_typos_are_corrected_against_the_index_vocabulary(services: Services):
    assert (await top(services, "helo"))[0] == "misc:hello"
    assert (await top(services, "weathr"))[0] == "misc:get_weather"
    assert (await top(services, "stok qoute"))[0] == "misc:stock_quote"
    assert (await top(services, "stck"))[0] == "misc:stock_quote"
    ranked = await services.search.lexical("comit", limit=5)
    assert ranked[0].tool_id == "git:git_commit" and "commit (from 'comit')" in ranked[0].why


async def test_natural_language_is_ranked_not_filtered(services: Services):
    ranked = await services.search.lexical("show me yesterday's commits", limit=5)
    assert {r.tool_id for r in ranked[:2]} == {"git:git_commit", "git:git_log"}
    assert (await top(services, "what's on my calendar"))[0] == "misc:calendar_events"
    # A parameter's name and description are searched too.
    assert (await top(services, "which city"))[0] == "misc:get_weather"


async def test_scores_are_normalised_best_first_and_say_why(services: Services):
    ranked = await services.search.lexical("git commit message", limit=10)
    assert ranked[0].tool_id == "git:git_commit" and ranked[0].score == 1.0
    assert all(0 < r.score <= 1 for r in ranked)
    assert [r.score for r in ranked] == sorted((r.score for r in ranked), reverse=True)
    assert ranked[0].why.startswith("words: ") and "commit" in ranked[0].why and "git" in ranked[0].why


async def test_tool_ids_limit_and_nothing_known(services: Services):
    assert await top(services, "commit", tool_ids=["git:git_log"]) == ["git:git_log"]
    assert await top(services, "commit", tool_ids=[]) == []
    assert await top(services, "commit", limit=0) == []
    assert len(await top(services, "git", limit=2)) == 2
    for text in ("", "   ", "🔍🔍", "\u200f\u202e", "the of and", "zzqxv", '" * NEAR OR AND - :'):
        assert isinstance(await top(services, text), list), text
    assert await top(services, "zzqxv") == []


async def test_disabled_tools_are_not_ranked(services: Services):
    await services.toolsets.set_enabled("git", False)
    assert "git:git_commit" not in await top(services, "commit")

"""tools/search as people type: misspelt words, sentences, words no tool has, common words, and
what each hit says about why it matched (the contract's match, the words matched, a score)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sidecar.client import SidecarClient
from tests.tools.search_helpers import hits, install

pytestmark = pytest.mark.anyio

GIT = {
    "git_commit": "Record changes to the repository with a message",
    "git_log": "Shows the commit logs of a branch",
    "git_status": "Shows the working tree status",
}
MISC: dict[str, Any] = {
    "get_weather": ("Current conditions for a place", {"type": "object", "properties": {
        "city": {"type": "string", "description": "Name of the town"}}}),
    "stock_quote": "Latest price of a share on the market",
    "hello": "Say hello to someone",
    "calendar_events": "List the events of the user's calendar for a day",
}


@pytest.fixture
async def app_(app: SidecarClient, tmp_path: Path) -> SidecarClient:
    await install(app, tmp_path, "git", GIT)
    await install(app, tmp_path, "misc", MISC)
    return app


async def first(app: SidecarClient, q: str) -> dict[str, Any]:
    return (await app.request("tools/search", {"q": q}))["hits"][0]


async def test_misspelt_words_find_what_they_meant_and_say_so(app_: SidecarClient):
    hit = await first(app_, "helo")
    assert (hit["tool"]["id"], hit["match"]) == ("misc:hello", "fuzzy")
    assert {"query": "helo", "term": "hello"} in hit["matched"] and hit["score"] > 0
    hit = await first(app_, "weathr")
    assert hit["tool"]["id"] == "misc:get_weather" and hit["matched"] == [{"query": "weathr", "term": "weather"}]
    hit = await first(app_, "stok qoute")
    assert hit["tool"]["id"] == "misc:stock_quote"
    assert hit["matched"] == [{"query": "stok", "term": "stock"}, {"query": "qoute", "term": "quote"}]
    assert (await first(app_, "stck"))["tool"]["id"] == "misc:stock_quote"
    # Spelt right, the same tools rank above the tier of corrections.
    assert (await hits(app_, "stock quote"))[0] == ("misc:stock_quote", "prefix")


async def test_sentences_are_ranked_not_filtered(app_: SidecarClient):
    found = await hits(app_, "show me yesterday's commits")  # no tool has "yesterday"; "commits" is a typo
    assert {t for t, _ in found[:2]} == {"git:git_commit", "git:git_log"} and {m for _, m in found} == {"fuzzy"}
    assert (await hits(app_, "what's on my calendar"))[0] == ("misc:calendar_events", "word")
    # Common English words weigh nothing: the same answer as without them.
    assert await hits(app_, "the weather for me") == await hits(app_, "weather")
    # Only common words: they are what there is to search.
    assert isinstance(await hits(app_, "what is it"), list)


async def test_parameters_are_searched(app_: SidecarClient):
    hit = await first(app_, "which town")  # the description of get_weather's parameter "city"
    assert hit["tool"]["id"] == "misc:get_weather" and hit["matched"] == [{"query": "town", "term": "town"}]
    assert (await hits(app_, "city"))[0] == ("misc:get_weather", "word")


async def test_within_a_tier_the_most_relevant_first(app: SidecarClient, tmp_path: Path):
    # Installed together (same recency, no use): by id "archive" would come first; its name does not
    # hold the word, make_commit's does, and a name weighs more than a description.
    await install(app, tmp_path, "vcs", {"archive": "Shows commit history", "make_commit": "Record changes"})
    page = (await app.request("tools/search", {"q": "commit", "toolsetIds": ["vcs"]}))["hits"]
    assert [(h["tool"]["id"], h["match"]) for h in page] == [("vcs:make_commit", "word"), ("vcs:archive", "word")]
    assert page[0]["score"] > page[1]["score"] > 0


async def test_a_word_found_inside_a_word_names_it_and_scores_nothing(app_: SidecarClient):
    page = (await app_.request("tools/search", {"q": "ommi", "toolsetIds": ["git"]}))["hits"]
    assert {h["tool"]["id"] for h in page} == {"git:git_commit", "git:git_log"}
    assert all(h["match"] == "fuzzy" and h["score"] == 0
               and h["matched"] == [{"query": "ommi", "term": "commit"}] for h in page)
    recent = (await app_.request("tools/search", {"q": ""}))["hits"]
    assert recent and all(h["match"] == "recent" and h.get("matched", []) == [] and h["score"] == 0 for h in recent)

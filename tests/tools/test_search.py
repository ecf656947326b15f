"""tools/search as the UI uses it: ranked tiers, why each hit matched, disabled tools, filters,
paging, hostile queries, and an index that follows every change of the catalog."""

from __future__ import annotations

from pathlib import Path

import pytest

from sidecar.client import SidecarClient
from sidecar.paging import Pages
from tests.tools.search_helpers import hits, http_toolset, install

pytestmark = pytest.mark.anyio

INVALID_PARAMS = -32602
FINDER = {"search_web": "Look things up", "web_search": "Query the engines", "research_notes": "Keep notes",
          "unrelated": "Nothing to see"}


async def test_prefix_then_whole_word_then_fuzzy_each_saying_why(app: SidecarClient, tmp_path: Path):
    await install(app, tmp_path, "finder", FINDER)
    assert await hits(app, "search") == [
        ("finder:search_web", "prefix"), ("finder:web_search", "word"), ("finder:research_notes", "fuzzy")]
    # Several words: the names begin with them, the last one unfinished.
    assert (await hits(app, "search we"))[0] == ("finder:search_web", "prefix")
    assert (await hits(app, "web-search"))[0] == ("finder:web_search", "prefix")
    # Description and id words are whole words too; case does not matter.
    assert await hits(app, "ENGINES") == [("finder:web_search", "word")]
    assert ("finder:unrelated", "prefix") in await hits(app, "finder")  # its id begins with the toolset's


async def test_short_words_match_at_the_start_of_a_word_and_empty_lists_everything_by_recency(
        app: SidecarClient, tmp_path: Path):
    await install(app, tmp_path, "finder", FINDER)
    # Two characters are too few for the trigram index: "ea" is inside "search" but starts no word.
    assert await hits(app, "ea", toolsetIds=["finder"]) == []
    assert ("finder:unrelated", "word") not in await hits(app, "no")
    assert ("finder:research_notes", "fuzzy") in await hits(app, "no")  # "notes"
    everything = await hits(app, "")
    assert {m for _, m in everything} == {"recent"}
    listed = (await app.request("tools/list"))["tools"]
    assert sorted(t for t, _ in everything) == sorted(t["id"] for t in listed)
    assert await hits(app, "  *** ") == everything  # no letter or digit: the same as empty


async def test_every_provider_is_searched_by_slug_and_display_name(app: SidecarClient, tmp_path: Path):
    await install(app, tmp_path, "finder", FINDER)
    assert ("read_file", "prefix") in await hits(app, "read-file")  # a built-in, by its derived slug
    assert await hits(app, "unrelated") == [("finder:unrelated", "prefix")]  # its view shown (and kept)
    await app.request("tools/setOverride", {"toolsetId": "finder", "toolId": "unrelated",
                                            "nameOverride": "Quokka counter"})
    assert await hits(app, "quokka") == [("finder:unrelated", "prefix")]
    tool = (await app.request("tools/search", {"q": "quokka"}))["hits"][0]["tool"]
    assert tool["name"] == "Quokka counter" and tool["id"] == "finder:unrelated"


async def test_disabled_tools_are_left_out_unless_asked(app: SidecarClient, tmp_path: Path):
    await install(app, tmp_path, "finder", FINDER)
    await app.request("tools/setOverride", {"toolsetId": "finder", "toolId": "web_search", "enabled": False})
    assert ("finder:web_search", "word") not in await hits(app, "search")
    assert ("finder:web_search", "word") in await hits(app, "search", includeDisabled=True)
    await app.request("toolsets/setEnabled", {"id": "finder", "enabled": False})
    assert await hits(app, "search") == []
    assert len(await hits(app, "search", includeDisabled=True)) == 3
    await app.request("toolsets/setEnabled", {"id": "finder", "enabled": True})
    assert ("finder:search_web", "prefix") in await hits(app, "search")


async def test_the_index_follows_installs_overrides_upgrades_and_uninstalls(app: SidecarClient, tmp_path: Path):
    assert await hits(app, "quokka") == []
    await install(app, tmp_path / "1", "zoo", {"feed": "Feed the quokka"})
    assert await hits(app, "quokka") == [("zoo:feed", "word")]
    await app.request("tools/setOverride", {"toolsetId": "zoo", "toolId": "feed",
                                            "descriptionOverride": "Feed the wombat"})
    assert await hits(app, "quokka") == [] and await hits(app, "wombat") == [("zoo:feed", "word")]
    await app.request("tools/setOverride", {"toolsetId": "zoo", "toolId": "feed", "descriptionOverride": None})
    assert await hits(app, "wombat") == [] and await hits(app, "quokka") == [("zoo:feed", "word")]
    upgraded = http_toolset(tmp_path / "2", "zoo", {"groom": "Brush the quokka"})
    await app.request("toolsets/import", {"path": str(upgraded), "replace": True})
    assert await hits(app, "quokka") == [("zoo:groom", "word")]
    await app.request("toolsets/uninstall", {"id": "zoo"})
    assert await hits(app, "quokka") == [] and await hits(app, "groom") == []


async def test_toolset_filter(app: SidecarClient, tmp_path: Path):
    await install(app, tmp_path, "finder", FINDER)
    await install(app, tmp_path, "other", {"file_search": "Find files"})
    assert {t for t, _ in await hits(app, "file", toolsetIds=["other"])} == {"other:file_search"}
    assert {t for t, _ in await hits(app, "file", toolsetIds=["builtin"])} >= {"read_file", "write_file"}
    assert ("other:file_search", "prefix") not in await hits(app, "file", toolsetIds=["builtin"])
    assert await hits(app, "file", toolsetIds=[]) == []


HOSTILE = ['"', '""', "*", "search*", '"search', "NEAR(search web)", "search NEAR web", "-search", "NOT search",
           "search OR nothing", "search AND", "^search", "{slug}: search", "slug:search", "(search", "search)",
           "'; DROP TABLE tools; --", "\x00search", "search\u202e", "🔍 search", "Ｓｅａｒｃｈ", "سبحث", "搜索", "\\",
           "%_", "a" * 3000, "x y " * 2500]


@pytest.mark.parametrize("q", HOSTILE)
async def test_hostile_queries_are_answered_never_an_error(app: SidecarClient, tmp_path: Path, q: str):
    await install(app, tmp_path, "finder", FINDER)
    assert isinstance(await hits(app, q), list)


async def test_query_syntax_is_text(app: SidecarClient, tmp_path: Path):
    await install(app, tmp_path, "finder", FINDER)
    first = ("finder:search_web", "prefix")
    # Quotes, '*', '^', '-', ':' and braces are not syntax: what is left is the word "search".
    for q in ('"search', 'search"', "search*", "^search", "-search", "{search}:", "(search)", "\x00search",
              "search\u202e", "🔍 search", "Ｓｅａｒｃｈ"):
        assert (await hits(app, q))[0] == first, q
    # OR, NOT, AND and NEAR are words, not operators: common ones weigh nothing beside the others,
    # and a word no tool has ("near") leaves the others to rank (fuzzy: not every word was found).
    either = await hits(app, "search OR nothing")
    assert {m for _, m in either} == {"fuzzy"}
    assert {"finder:unrelated", "finder:search_web", "finder:web_search"} <= {t for t, _ in either}
    assert await hits(app, "NOT search") == [("finder:search_web", "word"), ("finder:web_search", "word"),
                                             ("finder:research_notes", "fuzzy")]
    assert await hits(app, "notes NEAR") == [("finder:research_notes", "fuzzy")]
    assert await hits(app, "notes AND") == [("finder:research_notes", "word")]
    assert await hits(app, "notes") == [("finder:research_notes", "word")]
    await hits(app, "'; DROP TABLE tools; --")  # answered (words: drop, table, tools), and then:
    assert ("read_file", "prefix") in await hits(app, "read")  # the catalog is still there


async def test_a_ten_kilobyte_query_searches_and_a_longer_one_says_what_to_fix(app: SidecarClient):
    assert await hits(app, "wombat " * 1460) == []  # 10,220 characters
    reply = await app.request_raw("tools/search", {"q": "w" * 20_000})
    assert reply["error"]["code"] == INVALID_PARAMS and reply["error"]["data"]["path"] == "params.q"


async def test_pages_hold_every_hit_once_in_rank_order(app: SidecarClient, tmp_path: Path):
    await install(app, tmp_path, "finder", FINDER | {f"search_{i}": "more" for i in range(7)})
    whole = (await app.request("tools/search", {"q": "search", "pageSize": 500}))["hits"]
    paged = await hits(app, "search", pageSize=3)
    assert paged == [(h["tool"]["id"], h["match"]) for h in whole] and len(paged) == 10
    first = await app.request("tools/search", {"q": "search", "pageSize": 3})
    assert len(first["hits"]) == 3 and first["nextPageToken"]
    # Stable while the catalog grows: a tool added meanwhile is not repeated nor shifts the next page.
    await install(app, tmp_path, "late", {"search_aaa": "added between pages"})
    second = await app.request("tools/search", {"q": "search", "pageSize": 3, "pageToken": first["nextPageToken"]})
    assert [h["tool"]["id"] for h in second["hits"]] == [t for t, _ in paged[3:6]]


async def test_bad_page_tokens_are_invalid_params(app: SidecarClient, tmp_path: Path):
    await install(app, tmp_path, "finder", FINDER | {f"search_{i}": "more" for i in range(7)})
    first = await app.request("tools/search", {"q": "search", "pageSize": 3})
    other_list = Pages("toolCalls/list", {}, tuple[str, str]).token(("2026-01-01", "x"))
    forged = Pages("tools/search", {"q": ["search"], "includeDisabled": False, "toolsetIds": None},
                   tuple[int, str, int, str]).token(("x", 1, 2, 3))  # type: ignore[arg-type]  # forged on purpose
    for params in ({"q": "web", "pageToken": first["nextPageToken"]},  # made for another query
                   {"q": "search", "pageToken": other_list}, {"q": "search", "pageToken": "!!not a token"},
                   {"q": "search", "pageToken": forged}):
        reply = await app.request_raw("tools/search", params | {"pageSize": 3})
        assert reply["error"]["code"] == INVALID_PARAMS, reply
        assert reply["error"]["data"]["path"] == "params.pageToken"
        assert "pageToken" in reply["error"]["message"] or "page token" in reply["error"]["message"]


async def test_a_deleted_toolset_is_not_found_until_restored(app: SidecarClient, tmp_path: Path):
    await install(app, tmp_path, "finder", FINDER)
    await app.request("toolsets/delete", {"id": "finder"})
    assert await hits(app, "search", includeDisabled=True) == []
    await app.request("toolsets/restore", {"id": "finder"})
    assert ("finder:search_web", "prefix") in await hits(app, "search")


async def test_a_pattern_override_reaches_every_tool_it_matches(app: SidecarClient, tmp_path: Path):
    await install(app, tmp_path, "finder", FINDER)
    assert ("finder:search_web", "prefix") in await hits(app, "search")
    await app.request("tools/setOverride", {"toolsetId": "finder", "toolId": "search_*", "enabled": False})
    assert [t for t, _ in await hits(app, "search")] == ["finder:web_search", "finder:research_notes"]
    assert ("finder:search_web", "prefix") in await hits(app, "search", includeDisabled=True)

"""The search index itself, on a real SQLite file: recency then usage order tools within a tier,
a changed document is found by its new words only, a gone one by none."""

from __future__ import annotations

from pathlib import Path

import pytest

from sidecar.store import Database
from sidecar.store.tool_search import SearchDoc, ToolSearchRepo, match_of, words_of

pytestmark = pytest.mark.anyio


def doc(tool_id: str, *, modified: str = "", description: str = "", enabled: bool = True) -> SearchDoc:
    name = tool_id.rsplit(":", 1)[-1]
    return SearchDoc(tool_id=tool_id, toolset_id=tool_id.split(":")[0], enabled=enabled, modified_at=modified,
                     slug=name.replace("_", "-"), name=name, display=name, description=description, tags="")


async def used(repo: ToolSearchRepo, **counts: int) -> None:
    """Record usage as the call records do (tool_usage), by tool id with ':' written as '__'."""
    async with repo.db.write() as w:
        await w.executemany("INSERT INTO tool_usage (tool_id, call_count) VALUES (?, ?) ON CONFLICT (tool_id) "
                            "DO UPDATE SET call_count = excluded.call_count",
                            [(k.replace("__", ":"), n) for k, n in counts.items()])


async def search(repo: ToolSearchRepo, q: str, after: tuple[int, str, int, str] | None = None,
                 limit: int = 100, include_disabled: bool = False) -> list[tuple[str, int]]:
    rows = await repo.search(match_of(words_of(q)), include_disabled=include_disabled, toolset_ids=None,
                             after=after, limit=limit)
    return [(r.tool_id, r.tier) for r in rows]


@pytest.fixture
async def repo(tmp_path: Path):
    db = await Database.open(tmp_path / "sidecar.db")
    try:
        yield ToolSearchRepo(db)
    finally:
        await db.close()


async def test_within_a_tier_recent_first_then_most_called(repo: ToolSearchRepo):
    await used(repo, a__map_old=99, c__map_used=7, d__map_unused=1, e__draw=1000)  # before they are indexed
    await repo.sync([
        doc("a:map_old", modified="2026-01-01T00:00:00Z"),
        doc("b:map_new", modified="2026-11-01T00:00:00Z"),
        doc("c:map_used", modified="2026-06-01T00:00:00Z"),
        doc("d:map_unused", modified="2026-06-01T00:00:00Z"),
        doc("e:draw", description="draws a map", modified="2026-12-01T00:00:00Z"),
    ], [], [])
    assert await search(repo, "map") == [("b:map_new", 0), ("c:map_used", 0), ("d:map_unused", 0),
                                         ("a:map_old", 0), ("e:draw", 1)]
    # The empty query: everything, by recency alone.
    assert [t for t, _ in await search(repo, "")] == ["e:draw", "b:map_new", "c:map_used", "d:map_unused",
                                                      "a:map_old"]
    # Usage recorded later (any provider's: tool_usage) moves a tool within its tier, never across tiers.
    await used(repo, d__map_unused=50)
    assert [t for t, _ in await search(repo, "map")][1:3] == ["d:map_unused", "c:map_used"]


async def test_keyset_positions_continue_after_the_last_hit(repo: ToolSearchRepo):
    await repo.sync([doc(f"t:map_{i}", modified=f"2026-01-0{i}") for i in range(1, 8)], [], [])
    rows = await repo.search(match_of(["map"]), include_disabled=False, toolset_ids=None, after=None, limit=3)
    rest = await search(repo, "map", after=rows[-1].position())
    assert [t for t, _ in rest] == ["t:map_4", "t:map_3", "t:map_2", "t:map_1"]


async def test_changed_and_gone_documents(repo: ToolSearchRepo):
    await repo.sync([doc("z:feed", description="feed the quokka"), doc("z:walk", description="walk it")], [], [])
    assert await search(repo, "quokka") == [("z:feed", 1)]
    await repo.sync([doc("z:feed", description="feed the wombat")], ["z:walk"], [])
    assert await search(repo, "quokka") == [] and await search(repo, "walk") == []
    assert await search(repo, "wombat") == [("z:feed", 1)]
    await repo.sync([doc("z:feed", description="feed the wombat", enabled=False)], [], [])
    assert await search(repo, "wombat") == []
    assert await search(repo, "wombat", include_disabled=True) == [("z:feed", 1)]


async def test_diacritics_and_case_fold(repo: ToolSearchRepo):
    await repo.sync([doc("c:order", description="Commande au Café"), doc("c:Über", description="x")], [], [])
    assert await search(repo, "cafe") == [("c:order", 1)]
    assert await search(repo, "CAFÉ") == [("c:order", 1)]
    assert await search(repo, "uber") == [("c:Über", 0)]


async def test_writes_mark_stored_tools_and_a_sync_clears_only_the_marks_it_read(repo: ToolSearchRepo):
    db = repo.db
    async with db.write() as w:
        await w.execute("INSERT INTO toolsets (id, name, installed_at, updated_at, source_type) "
                        "VALUES ('geo', 'Geo', 'x', 'x', 'local')")
        await w.executemany("INSERT INTO tools (tool_id, toolset_id, provider, name, description) "
                            "VALUES (?, 'geo', 'http', ?, 'a map tool')",
                            [("geo:map_a", "map_a"), ("geo:map_b", "map_b")])
    done = await repo.dirty()
    assert sorted(t for t, _ in done) == ["geo:map_a", "geo:map_b"]
    async with db.write() as w:  # written after the marks were read: marked again
        await w.execute("UPDATE tools SET description = 'a new map tool' WHERE tool_id = 'geo:map_b'")
    await repo.sync([doc("geo:map_a"), doc("geo:map_b")], [], done)
    assert [t for t, _ in await repo.dirty()] == ["geo:map_b"]
    await repo.sync([doc("geo:map_b")], [], await repo.dirty())
    assert await repo.dirty() == []
    # An override, a pattern one too, marks every stored tool of its toolset.
    async with db.write() as w:
        await w.execute("INSERT INTO tool_overrides (id, toolset_id, tool_id, updated_at) "
                        "VALUES ('o1', 'geo', 'geo:map_*', 'x')")
    assert sorted(t for t, _ in await repo.dirty()) == ["geo:map_a", "geo:map_b"]
    # Usage written by the call records (not a catalog write) reorders a tier with no sync at all.
    assert await search(repo, "map") == [("geo:map_a", 0), ("geo:map_b", 0)]
    await used(repo, geo__map_b=3)
    assert await search(repo, "map") == [("geo:map_b", 0), ("geo:map_a", 0)]


async def structure(repo: ToolSearchRepo) -> list[int]:
    from sidecar.store.tool_search import segments

    return [segments((await repo.db.fetchone(f"SELECT block FROM {t}_data WHERE id = 10"))[0])  # type: ignore[index]
            for t in ("tool_search_words", "tool_search_trigrams")]


async def test_merged_tables_rank_as_before_and_follow_later_changes(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch):
    """An index of more than MAX_SEGMENTS segments, looked at after MERGE_AFTER documents written,
    is merged: the same hits in the same order as one never merged, then and after later changes."""
    from sidecar.store import tool_search

    docs = [doc(f"t{i % 7}:tool_{i}", modified=f"2026-0{1 + i % 9}-01T00:00:00Z",
                description=f"reads {'maps' if i % 3 else 'roadmaps'} and file {i} of the research")
            for i in range(60)]
    merged = ToolSearchRepo(await Database.open(tmp_path / "merged.db"))
    plain = ToolSearchRepo(await Database.open(tmp_path / "plain.db"))
    try:
        monkeypatch.setattr(tool_search, "MERGE_AFTER", 25)
        monkeypatch.setattr(tool_search, "MAX_SEGMENTS", 1)
        for part in (docs[:20], docs[20:40], docs[40:]):
            await merged.sync(part, [], [])
        assert merged.merges >= 1 and await structure(merged) == [1, 1]  # looked at: at first, after 40 written
        monkeypatch.setattr(tool_search, "MAX_SEGMENTS", 10**9)
        for part in (docs[:20], docs[20:40], docs[40:]):
            await plain.sync(part, [], [])
        assert plain.merges == 0 and min(await structure(plain)) > 1
        queries = ("map", "file 7", "search", "reads", "tool_4", "roadmaps file")
        for repo in (merged, plain):  # a changed document, found by its new words only
            await repo.sync([doc("t1:tool_1", description="feeds the quokka")], ["t2:tool_2"], [])
        for q in (*queries, "quokka"):
            full = await merged.search(match_of(words_of(q)), include_disabled=False, toolset_ids=None,
                                       after=None, limit=100)
            assert full == await plain.search(match_of(words_of(q)), include_disabled=False, toolset_ids=None,
                                              after=None, limit=100), q
        assert await search(merged, "quokka") == [("t1:tool_1", 1)]
        assert "t2:tool_2" not in {t for t, _ in await search(merged, "tool_2")}
    finally:
        await merged.db.close()
        await plain.db.close()


async def test_hits_found_only_inside_a_word_come_after_every_other_at_any_page_size(repo: ToolSearchRepo):
    """A ranking read in pages of any size, or in one go, is the same: words found inside a word
    (read only when a page needs them) come last, in recency order."""
    await repo.sync([doc(f"a:map_{i}", modified=f"2026-01-{10 + i}T00:00:00Z") for i in range(6)]
                    + [doc(f"b:plan_{i}", description="a roadmap", modified=f"2026-02-{10 + i}T00:00:00Z")
                       for i in range(4)]
                    + [doc("c:draw", description="draws a map", modified="2026-03-01T00:00:00Z")], [], [])
    whole = await repo.search(match_of(words_of("map")), include_disabled=False, toolset_ids=None, after=None,
                              limit=100)
    assert [(r.tool_id, r.tier, r.relevance > 0) for r in whole] == [
        *((f"a:map_{i}", 0, True) for i in reversed(range(6))), ("c:draw", 1, True),
        *((f"b:plan_{i}", 2, False) for i in reversed(range(4)))]
    for size in range(1, 12):
        pages, after = [], None
        while page := await repo.search(match_of(words_of("map")), include_disabled=False, toolset_ids=None,
                                        after=after, limit=size):
            pages += page
            after = page[-1].position()
        assert pages == whole, size
    # Where one tool found inside a word ranks now (a page token's last hit, looked up alone).
    alone = await repo.search(match_of(words_of("map")), include_disabled=False, toolset_ids=None, after=None,
                              limit=1, tool_id="b:plan_2")
    assert alone == [r for r in whole if r.tool_id == "b:plan_2"]

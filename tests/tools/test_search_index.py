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

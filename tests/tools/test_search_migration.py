"""Migration 0016 (*_tool_search_params.sql) on a database indexed before it: the old documents are
dropped, every stored tool is marked to be indexed again, and the index now holds parameters and a
vocabulary."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from sidecar.store.db import Database, migrations
from sidecar.store.tool_search import SearchDoc, ToolSearchRepo, match_of

pytestmark = pytest.mark.anyio


async def test_an_index_made_before_is_made_again_with_parameters(tmp_path: Path):
    steps = migrations()
    step = next(n for n, name, _ in steps if name.endswith("_tool_search_params.sql"))
    path = tmp_path / "old.db"
    raw = sqlite3.connect(path, isolation_level=None)
    body = "\n".join(sql for n, _, sql in steps if n < step)
    raw.executescript(f"BEGIN;\n{body}\nPRAGMA user_version={step - 1};\nCOMMIT;")
    raw.execute("INSERT INTO toolsets (id, name, installed_at, updated_at, source_type) "
                "VALUES ('geo', 'Geo', 'x', 'x', 'local')")
    raw.execute("INSERT INTO tools (tool_id, toolset_id, provider, name, description) "
                "VALUES ('geo:map', 'geo', 'http', 'map', 'Draw a map')")
    raw.execute("DELETE FROM tool_search_dirty")  # as a search leaves it: indexed, nothing stale
    raw.execute("INSERT INTO tool_search_docs (doc, tool_id, toolset_id, enabled, description) "
                "VALUES (1, 'geo:map', 'geo', 1, 'Draw a map')")
    raw.execute("INSERT INTO tool_search_words (rowid, slug, tool_id, name, display, description, tags) "
                "VALUES (1, 'map', 'geo:map', 'map', 'map', 'Draw a map', '')")
    raw.close()

    db = await Database.open(path)
    try:
        repo = ToolSearchRepo(db)
        assert [t for t, _ in await repo.dirty()] == ["geo:map"]  # to be indexed again by the next search
        assert await db.fetchall("SELECT * FROM tool_search_docs") == []
        assert (await repo.vocabulary()).docs == {}
        await repo.sync([SearchDoc(tool_id="geo:map", toolset_id="geo", enabled=True, modified_at="", slug="map",
                                   name="map", display="map", description="Draw a map",
                                   tags="", params="latitude of the centre")], [], await repo.dirty())
        rows = await repo.search(match_of(["latitude"]), include_disabled=False, toolset_ids=None, after=None,
                                 limit=10)
        assert [(r.tool_id, r.tier) for r in rows] == [("geo:map", 1)]
        assert (await repo.vocabulary()).docs["latitude"] == 1
    finally:
        await db.close()

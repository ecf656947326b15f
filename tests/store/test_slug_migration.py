"""The slugs migration (migrations/*_slugs.sql): tools stored before it get the slug their id
gives, version 1, and their toolset's install time as createdAt; two ids that would share a slug
keep one each."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from sidecar.store.db import Database, migrations

pytestmark = pytest.mark.anyio


async def test_tools_stored_before_get_slugs_versions_and_times(tmp_path: Path):
    steps = migrations()
    slugs_step = next(n for n, name, _ in steps if name.endswith("_slugs.sql"))
    path = tmp_path / "old.db"
    raw = sqlite3.connect(path, isolation_level=None)
    body = "\n".join(sql for n, _, sql in steps if n < slugs_step)
    raw.executescript(f"BEGIN;\n{body}\nPRAGMA user_version={slugs_step - 1};\nCOMMIT;")
    raw.execute("INSERT INTO toolsets (id, name, installed_at, updated_at, source_type) "
                "VALUES ('shop', 'Shop', '2026-01-01T00:00:00Z', '2026-02-01T00:00:00Z', 'zip')")
    for tool_id in ("shop:get_item", "shop:get-item", "shop:list.items"):
        raw.execute("INSERT INTO tools (tool_id, toolset_id, provider, name) VALUES (?, 'shop', 'http', 'x')",
                    (tool_id,))
    raw.execute("INSERT INTO tools (tool_id, provider, name) VALUES ('read_file', 'builtin', 'Read')")
    raw.close()

    db = await Database.open(path)
    try:
        rows = {r["tool_id"]: tuple(r)[1:] for r in await db.fetchall(
            "SELECT tool_id, slug, version, current, created_at, modified_at FROM tools ORDER BY rowid")}
        toolset = await db.fetchone("SELECT modified_at FROM toolsets")
    finally:
        await db.close()
    assert rows["shop:get_item"] == ("get-item", "1", 1, "2026-01-01T00:00:00Z", "2026-02-01T00:00:00Z")
    assert rows["shop:get-item"][0] == "get-item-2"  # the later one keeps a slug of its own
    assert rows["shop:list.items"][0] == "list-items"
    assert rows["read_file"][:3] == ("read-file", "1", 1) and rows["read_file"][3]
    assert toolset["modified_at"] == ""  # read as its installed_at until a structural change

from __future__ import annotations

import sqlite3
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest

from sidecar.errors import StorageError
from sidecar.store import Database
from sidecar.store.db import migrations

pytestmark = pytest.mark.anyio

NOW = "2026-11-22T00:00:00Z"

TABLES = {
    "toolsets", "toolset_files", "tools", "tool_overrides", "toolset_mcp_servers", "chats",
    "workspace_manifests", "messages", "tool_calls", "tool_permissions", "providers", "settings",
}


async def test_fresh_database_has_the_whole_schema_and_pragmas(tmp_path: Path):
    db = await Database.open(tmp_path / "s.db")
    try:
        names = {r[0] for r in await db.fetchall("SELECT name FROM sqlite_master WHERE type='table'")}
        assert TABLES <= names
        assert (await db.fetchone("PRAGMA journal_mode"))[0] == "wal"
        assert (await db.fetchone("PRAGMA foreign_keys"))[0] == 1
        assert (await db.fetchone("PRAGMA synchronous"))[0] == 1  # NORMAL
        assert (await db.fetchone("PRAGMA user_version"))[0] == migrations()[-1][0]
        assert await db.fetchall("PRAGMA foreign_key_check") == []
        cols = {r[1] for r in await db.fetchall("PRAGMA table_info(toolsets)")}
        assert "user_mcp" in cols
        cols = {r[1] for r in await db.fetchall("PRAGMA table_info(chats)")}
        assert {"active_leaf_message_id", "active_manifest_id"} <= cols
    finally:
        await db.close()


def _schema(path: Path) -> list[tuple[str, str, str]]:
    raw = sqlite3.connect(path)
    try:
        return sorted(raw.execute("SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL"))
    finally:
        raw.close()


async def test_a_new_database_has_the_schema_the_migrations_make_one_by_one(tmp_path: Path):
    # A new file is built in one go (sidecar/store/db.py create); an old one migrates step by step.
    (tmp_path / "old").mkdir()
    old = tmp_path / "old" / "s.db"
    sqlite3.connect(old).close()  # exists, empty, version 0: migrated as an old database is
    db = await Database.open(old)
    await db.close()
    new = tmp_path / "new.db"
    db = await Database.open(new)
    await db.close()
    assert _schema(new) == _schema(old)
    assert len(_schema(new)) > 20


async def test_a_database_left_half_made_by_a_crash_is_built_again(tmp_path: Path):
    path = tmp_path / "s.db"
    (tmp_path / "s.db.new").write_bytes(b"SQLite format 3\x00 cut off by a crash")
    db = await Database.open(path)
    try:
        assert (await db.fetchone("PRAGMA user_version"))[0] == migrations()[-1][0]
        assert (await db.fetchone("PRAGMA journal_mode"))[0] == "wal"
    finally:
        await db.close()
    assert not (tmp_path / "s.db.new").exists()


async def test_reopening_applies_nothing_and_keeps_data(tmp_path: Path):
    db = await Database.open(tmp_path / "s.db")
    async with db.write() as w:
        await w.execute("INSERT INTO chats (id, title, created_at, updated_at) VALUES ('c1', 't', ?, ?)", (NOW, NOW))
    await db.close()
    db = await Database.open(tmp_path / "s.db")
    try:
        assert (await db.fetchone("SELECT title FROM chats WHERE id='c1'"))["title"] == "t"
    finally:
        await db.close()


async def seed_chat(db: Database) -> None:
    async with db.write() as w:
        await w.execute("INSERT INTO chats (id, created_at, updated_at) VALUES ('c1', ?, ?)", (NOW, NOW))
        await w.execute("INSERT INTO workspace_manifests (id, chat_id, files, created_at, source) "
                        "VALUES ('m1', 'c1', '{}', ?, 'edit')", (NOW,))
        await w.executemany(
            "INSERT INTO messages (id, chat_id, parent_id, role, content, manifest_id, created_at) "
            "VALUES (?, 'c1', ?, ?, ?, ?, ?)",
            [("u1", None, "user", "hi", None, NOW), ("a1", "u1", "assistant", "yo", "m1", NOW),
             ("a2", "u1", "assistant", "hey", None, NOW)],
        )
        await w.execute("UPDATE chats SET active_leaf_message_id='a1', active_manifest_id='m1' WHERE id='c1'")
        await w.execute("INSERT INTO tool_calls (id, chat_id, message_id, tool_id, status, started_at, "
                        "post_manifest_id) VALUES ('t1', 'c1', 'a1', 'write_file', 'success', ?, 'm1')", (NOW,))


async def test_deleting_a_chat_cascades_to_its_tree(tmp_path: Path):
    db = await Database.open(tmp_path / "s.db")
    try:
        await seed_chat(db)
        siblings = await db.fetchall("SELECT id FROM messages WHERE parent_id='u1' ORDER BY id")
        assert [r["id"] for r in siblings] == ["a1", "a2"]  # two branches from one question
        async with db.write() as w:
            await w.execute("DELETE FROM chats WHERE id='c1'")
        for table in ("messages", "workspace_manifests", "tool_calls"):
            assert (await db.fetchone(f"SELECT count(*) FROM {table}"))[0] == 0
    finally:
        await db.close()


async def test_constraints_are_enforced_and_a_failed_write_leaves_nothing(tmp_path: Path):
    db = await Database.open(tmp_path / "s.db")
    try:
        with pytest.raises(sqlite3.IntegrityError):
            async with db.write() as w:
                await w.execute("INSERT INTO chats (id, created_at, updated_at) VALUES ('c2', ?, ?)", (NOW, NOW))
                await w.execute("INSERT INTO messages (id, chat_id, role, created_at) "
                                "VALUES ('m', 'no-such-chat', 'user', ?)", (NOW,))
        assert (await db.fetchone("SELECT count(*) FROM chats"))[0] == 0  # rolled back as a unit
        with pytest.raises(sqlite3.IntegrityError):
            async with db.write() as w:
                await w.execute("INSERT INTO chats (id, created_at, updated_at) VALUES ('c3', ?, ?)", (NOW, NOW))
                await w.execute("INSERT INTO messages (id, chat_id, role, created_at) "
                                "VALUES ('m', 'c3', 'wizard', ?)", (NOW,))
    finally:
        await db.close()


async def test_a_whole_write_commits_as_one_and_a_failed_one_leaves_nothing(tmp_path: Path):
    db = await Database.open(tmp_path / "s.db")
    try:
        def two_chats(conn: sqlite3.Connection) -> int:
            conn.executemany("INSERT INTO chats (id, created_at, updated_at) VALUES (?, ?, ?)",
                             [("c1", NOW, NOW), ("c2", NOW, NOW)])
            return 2

        before = db.transactions
        assert await db.write_whole(two_chats) == 2
        assert db.transactions == before + 1
        assert (await db.fetchone("SELECT count(*) FROM chats"))[0] == 2

        def then_a_bad_message(conn: sqlite3.Connection) -> None:
            conn.execute("INSERT INTO chats (id, created_at, updated_at) VALUES ('c3', ?, ?)", (NOW, NOW))
            conn.execute("INSERT INTO messages (id, chat_id, role, created_at) VALUES ('m', 'c3', 'wizard', ?)",
                         (NOW,))

        with pytest.raises(sqlite3.IntegrityError):  # the caller's to interpret, as with write()
            await db.write_whole(then_a_bad_message)

        def then_bad_sql(conn: sqlite3.Connection) -> None:
            conn.execute("INSERT INTO chats (id, created_at, updated_at) VALUES ('c4', ?, ?)", (NOW, NOW))
            conn.execute("INSERT INTO no_such_table VALUES (1)")

        with pytest.raises(StorageError, match="no_such_table"):
            await db.write_whole(then_bad_sql)

        def then_a_bug(conn: sqlite3.Connection) -> None:
            conn.execute("INSERT INTO chats (id, created_at, updated_at) VALUES ('c5', ?, ?)", (NOW, NOW))
            raise KeyError("a bug in the caller")

        with pytest.raises(KeyError):
            await db.write_whole(then_a_bug)
        # Each failure rolled its transaction back whole, and the database still takes writes.
        assert [r[0] for r in await db.fetchall("SELECT id FROM chats ORDER BY id")] == ["c1", "c2"]
        assert db.transactions == before + 1
        async with db.write() as w:
            await w.execute("INSERT INTO chats (id, created_at, updated_at) VALUES ('c6', ?, ?)", (NOW, NOW))
        assert (await db.fetchone("SELECT count(*) FROM chats"))[0] == 3
    finally:
        await db.close()


async def test_writers_are_serialised(tmp_path: Path):
    db = await Database.open(tmp_path / "s.db")
    try:
        async def add(i: int) -> None:
            async with db.write() as w:
                await w.execute("INSERT INTO settings (key, value, updated_at) VALUES (?, '1', ?)", (f"k{i}", NOW))
                await anyio.lowlevel.checkpoint()
                await w.execute("UPDATE settings SET value='2' WHERE key=?", (f"k{i}",))

        async with anyio.create_task_group() as tg:
            for i in range(20):
                tg.start_soon(add, i)
        assert (await db.fetchone("SELECT count(*) FROM settings WHERE value='2'"))[0] == 20
    finally:
        await db.close()


async def test_a_newer_schema_is_refused_without_touching_it(tmp_path: Path):
    path = tmp_path / "s.db"
    with sqlite3.connect(path) as raw:
        raw.execute("PRAGMA user_version=999")
    with pytest.raises(StorageError, match="newer than this sidecar"):
        await Database.open(path)
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA user_version").fetchone()[0] == 999


async def test_a_corrupt_file_is_a_storage_error(tmp_path: Path):
    path = tmp_path / "s.db"
    path.write_bytes(b"garbage" * 1000)
    with pytest.raises(StorageError, match="cannot be used"):
        await Database.open(path)


def test_migrations_are_numbered_without_gaps():
    numbers = [n for n, _, _ in migrations()]
    assert numbers == list(range(1, len(numbers) + 1))


async def test_cached_reads_follow_the_writes_that_say_they_change_them(tmp_path: Path):
    db = await Database.open(tmp_path / "s.db")
    try:
        async with db.write() as w:
            await w.execute("INSERT INTO settings (key, value, updated_at) VALUES ('k', '1', 'now')")

        async def load() -> str:
            return (await db.fetchone("SELECT value FROM settings WHERE key = 'k'"))[0]

        assert await db.cached("catalog", "k", load) == "1"
        async with db.write() as w:  # says nothing about the catalog: the cache stays
            await w.execute("UPDATE settings SET value = '2' WHERE key = 'k'")
        assert await db.cached("catalog", "k", load) == "1"
        async with db.write(changes="catalog") as w:
            await w.execute("UPDATE settings SET value = '3' WHERE key = 'k'")
            # Read inside the open transaction (this connection sees it): returned, not kept.
            assert await db.cached("catalog", "k", load) == "3"
            await w.execute("UPDATE settings SET value = '4' WHERE key = 'k'")
        assert await db.cached("catalog", "k", load) == "4"

        with pytest.raises(RuntimeError):
            async with db.write(changes="catalog") as w:
                await w.execute("UPDATE settings SET value = '5' WHERE key = 'k'")
                assert await db.cached("catalog", "k", load) == "5"
                raise RuntimeError("rolled back")
        assert await db.cached("catalog", "k", load) == "4"  # the rolled-back value was never kept
    finally:
        await db.close()


async def test_another_task_never_reads_a_cached_value_half_written(tmp_path: Path):
    # An upgrade deletes a toolset's tools, then inserts the new ones, on the one connection every
    # reader shares: a tools/get in between used to answer "no such tool".
    db = await Database.open(tmp_path / "s.db")
    try:
        async with db.write() as w:
            await w.execute("INSERT INTO settings (key, value, updated_at) VALUES ('k', 'old', 'now')")

        async def load() -> str | None:
            row = await db.fetchone("SELECT value FROM settings WHERE key = 'k'")
            return None if row is None else row[0]

        deleted, seen = anyio.Event(), []

        async def reader() -> None:
            await deleted.wait()
            seen.append(await db.cached("catalog", "k", load))

        async with anyio.create_task_group() as tg:
            tg.start_soon(reader)
            async with db.write(changes="catalog") as w:
                await w.execute("DELETE FROM settings WHERE key = 'k'")
                deleted.set()
                for _ in range(20):  # the reader runs now, while the row is gone
                    await anyio.lowlevel.checkpoint()
                await w.execute("INSERT INTO settings (key, value, updated_at) VALUES ('k', 'new', 'now')")
        assert seen == ["new"]
    finally:
        await db.close()

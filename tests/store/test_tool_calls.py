"""Tool call records: a result kept as the worker's JSON is stored and read back as its value;
who started a call is kept with it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import anyio
import msgspec
import pytest

from sidecar.store import Database, tool_calls
from sidecar.store.db import migrations
from sidecar.store.tool_calls import Initiator, ToolCallRepo, ToolCallRow
from tests.timing import scaled

pytestmark = pytest.mark.anyio

NOW = "2026-11-22T00:00:00Z"


def row(call_id: str, result: object, chat_id: str | None = None) -> ToolCallRow:
    return ToolCallRow(id=call_id, tool_id="t:x", chat_id=chat_id, args={"a": 1}, status="success",
                       started_at=NOW, result=result)


async def test_a_result_still_in_json_reads_back_as_the_value_a_built_one_does(tmp_path: Path):
    value = {"text": 'résumé "1"\\\n\t\x00✓', "n": [1, 1.5, True, None], "big": 2**63}
    db = await Database.open(tmp_path / "s.db")
    try:
        async with db.write() as w:
            await w.execute("INSERT INTO chats (id, created_at, updated_at) VALUES ('c1', ?, ?)", (NOW, NOW))
        repo = ToolCallRepo(db)
        async with anyio.create_task_group() as tg:
            repo.bind(tg)
            await repo.finish(row("built", value), inserted=False, later=True)
            await repo.finish(row("raw", msgspec.Raw(msgspec.json.encode(value))), inserted=False, later=True)
            started = row("in-chat", None, "c1")
            await repo.start(started)
            started.result = msgspec.Raw(msgspec.json.encode(value))
            await repo.finish(started)
            await repo.aclose()
        for call_id in ("built", "raw", "in-chat"):
            got = await repo.get(call_id)
            assert got is not None and got.result == value, call_id
        stored = {r[0]: r[1] for r in await db.fetchall("SELECT id, result FROM tool_calls")}
        assert stored["raw"] == stored["built"] == stored["in-chat"]
    finally:
        await db.close()


async def test_records_made_before_the_audit_trail_say_who_started_them(tmp_path: Path):
    """Migration 0007 fills in, for the records already there, what the audit trail filters on."""
    path = tmp_path / "s.db"
    raw = sqlite3.connect(path)
    for number, _, sql in migrations()[:6]:
        raw.executescript(f"BEGIN;\n{sql}\nPRAGMA user_version={number};\nCOMMIT;")
    raw.executescript(f"""
        INSERT INTO chats (id, created_at, updated_at) VALUES ('c1', '{NOW}', '{NOW}');
        INSERT INTO messages (id, chat_id, role, content, created_at) VALUES
            ('a1', 'c1', 'assistant', '', '{NOW}'), ('p1', 'c1', 'tool', 'Ran it', '{NOW}');
        INSERT INTO toolsets (id, name, source_type, installed_at, updated_at)
            VALUES ('ts', 'ts', 'local', '{NOW}', '{NOW}');
        INSERT INTO tools (tool_id, toolset_id, provider, name) VALUES ('ts:x', 'ts', 'python', 'x');
        INSERT INTO tool_calls (id, chat_id, message_id, tool_id, status, started_at, finished_at) VALUES
            ('model', 'c1', 'a1', 'ts:x', 'success', '2026-11-22T00:00:00.000000Z', '2026-11-22T00:00:00.250000Z'),
            ('palette', 'c1', 'p1', 'write_file', 'success', '{NOW}', '{NOW}'),
            ('api', NULL, NULL, 'mcp:ts~srv:echo', 'error', '{NOW}', NULL);
    """)
    raw.close()
    db = await Database.open(path)
    try:
        got = {r["id"]: dict(r) for r in await db.fetchall(
            "SELECT id, started_by, toolset_id, provider, duration_ms, confirmation FROM tool_calls")}
    finally:
        await db.close()
    assert got["model"] == {"id": "model", "started_by": "model", "toolset_id": "ts", "provider": "python",
                            "duration_ms": 250.0, "confirmation": None}
    assert got["palette"]["started_by"] == "palette"
    assert got["api"] == {"id": "api", "started_by": "api", "toolset_id": "ts", "provider": "mcp",
                          "duration_ms": None, "confirmation": None}


async def test_who_started_a_call_is_kept_on_its_record(tmp_path: Path):
    db = await Database.open(tmp_path / "s.db")
    try:
        repo = ToolCallRepo(db)
        call = row("sched", {"ok": True})
        call.started(Initiator(started_by="schedule", schedule_id="s1", confirmation="schedule"))
        call.toolset_id, call.provider, call.duration_ms = "ts", "http", 12.5
        await repo.finish(call, inserted=False)
        got = await repo.get("sched")
        assert got is not None
        assert (got.started_by, got.schedule_id, got.confirmation) == ("schedule", "s1", "schedule")
        assert (got.toolset_id, got.provider, got.duration_ms) == ("ts", "http", 12.5)
    finally:
        await db.close()


async def test_a_full_queue_is_written_without_waiting_for_the_window(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(tool_calls, "BATCH_WINDOW", 60.0)
    db = await Database.open(tmp_path / "s.db")

    async def stored() -> int:
        return (await db.fetchone("SELECT count(*) FROM tool_calls"))[0]  # (no flush: what a crash leaves)

    try:
        repo = ToolCallRepo(db)
        async with anyio.create_task_group() as tg:
            repo.bind(tg)
            for n in range(tool_calls.MAX_QUEUED - 1):
                await repo.finish(row(f"c{n}", n), inserted=False, later=True)
            await anyio.sleep(0.3)
            assert await stored() == 0  # within the window, still queued
            await repo.finish(row("last", None), inserted=False, later=True)
            with anyio.fail_after(scaled(10)):
                while await stored() < tool_calls.MAX_QUEUED:  # noqa: ASYNC110 -- polls the database: no event to wait on
                    await anyio.sleep(0.01)
            await repo.aclose()
    finally:
        await db.close()


async def test_usage_is_counted_again_from_the_records_of_calls_that_ran(tmp_path: Path):
    """The tool_usage migration fills in callCount/lastCalledAt from what is already recorded."""
    path = tmp_path / "s.db"
    steps = migrations()
    before = next(i for i, (_, name, _) in enumerate(steps) if name.endswith("_tool_usage.sql"))
    raw = sqlite3.connect(path)
    for number, _, sql in steps[:before]:
        raw.executescript(f"BEGIN;\n{sql}\nPRAGMA user_version={number};\nCOMMIT;")
    raw.executescript("""
        INSERT INTO toolsets (id, name, source_type, installed_at, updated_at) VALUES ('ts', 'ts', 'local', 'x', 'x');
        INSERT INTO tools (tool_id, toolset_id, provider, name, call_count, last_called_at) VALUES
            ('ts:old', 'ts', 'python', 'old', 7, '2026-01-01T00:00:00.000000Z'),
            ('ts:x', 'ts', 'python', 'x', 3, '2026-11-20T00:00:00.000000Z');
        INSERT INTO tool_calls (id, tool_id, status, started_at, duration_ms) VALUES
            ('1', 'mcp:ts~srv:echo', 'success', '2026-11-21T00:00:00.000000Z', 5),
            ('2', 'mcp:ts~srv:echo', 'error', '2026-11-22T00:00:00.000000Z', 9),
            ('3', 'mcp:ts~srv:echo', 'error', '2026-11-23T00:00:00.000000Z', NULL),
            ('4', 'ts:x', 'success', '2026-11-21T00:00:00.000000Z', 1);
    """)
    raw.close()
    db = await Database.open(path)
    try:
        got = {r[0]: (r[1], r[2]) for r in await db.fetchall("SELECT * FROM tool_usage")}
    finally:
        await db.close()
    assert got == {
        "mcp:ts~srv:echo": (2, "2026-11-22T00:00:00.000000Z"),  # the refused one (no duration) not counted
        "ts:old": (7, "2026-01-01T00:00:00.000000Z"),  # from before records were kept: the old counter
        "ts:x": (3, "2026-11-21T00:00:00.000000Z"),
    }

"""Tool call records: a result kept as the worker's JSON is stored and read back as its value."""

from __future__ import annotations

from pathlib import Path

import anyio
import msgspec
import pytest

from sidecar.store import Database
from sidecar.store.tool_calls import ToolCallRepo, ToolCallRow

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

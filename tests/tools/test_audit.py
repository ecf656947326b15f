"""The audit trail: toolCalls/list and toolCalls/export over every way a tool call starts."""

from __future__ import annotations

import csv
import io
import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import anyio
import pytest

from sidecar.api.tool_calls import ToolCall
from sidecar.client import SidecarClient
from sidecar.tools import audit

pytestmark = pytest.mark.anyio

SECRET = "hunter2-correct-horse-battery"


async def new_chat(sc: SidecarClient, title: str = "t") -> str:
    return (await sc.request("chats/create", {"title": title}))["chat"]["id"]


def tool_line(tool: str, args: dict[str, Any]) -> str:
    return f"/tool {tool} {json.dumps(args)}"


async def listed(sc: SidecarClient, **params: Any) -> list[dict[str, Any]]:
    return (await sc.request("toolCalls/list", params))["toolCalls"]


async def everything(sc: SidecarClient, **params: Any) -> list[dict[str, Any]]:
    """Every page, in order."""
    found: list[dict[str, Any]] = []
    token: str | None = None
    while True:
        page = await sc.request("toolCalls/list", params | ({"pageToken": token} if token else {}))
        found += page["toolCalls"]
        token = page.get("nextPageToken")
        if token is None:
            return found


async def test_every_way_a_call_starts_is_recorded_with_who_started_it(app: SidecarClient):
    chat = await new_chat(app)
    api = (await app.request("tools/call", {"chatId": chat, "toolId": "write_file",
                                            "args": {"path": "a.txt", "content": "api"}}))["toolCall"]
    palette = (await app.request("chat/invokeTool", {"chatId": chat, "toolId": "write_file",
                                                     "args": {"path": "b.txt", "content": "palette"}}))["toolCall"]
    asked: list[dict[str, Any]] = []
    answers = iter([{"decision": "deny"}, {"decision": "allowChat"}])
    app.handle("ui/confirmToolCall", lambda p: asked.append(p) or next(answers))
    await app.request("chat/send", {"chatId": chat, "content": tool_line("read_file", {"path": "a.txt"})})
    cmd = tool_line("run_command", {"command": "echo hi"})
    for _ in range(3):  # denied, allowed for the chat, then run on that grant without asking
        await app.request("chat/send", {"chatId": chat, "content": cmd})
    assert len(asked) == 2

    calls = await listed(app, chatId=chat)
    assert [c["startedBy"] for c in calls] == ["model", "model", "model", "model", "palette", "api"]
    assert [c.get("confirmation") for c in calls] == ["chatGrant", "userChat", "userDenied", "notNeeded", None, None]
    assert calls[-1]["id"] == api["id"] and calls[-2]["id"] == palette["id"]
    assert palette["startedBy"] == "palette" and api["startedBy"] == "api"  # the replies say it too
    for c in calls:
        assert c["provider"] == "builtin" and "toolsetId" not in c and c["status"] in ("success", "error")
        assert ("durationMs" in c) == (c.get("confirmation") != "userDenied"), c  # a denied call never ran
        assert "result" not in c  # unless asked for
    assert calls[2]["errorKind"] == "denied" and calls[2]["status"] == "error"

    assert [c["id"] for c in await listed(app, startedBy="palette")] == [palette["id"]]
    assert [c["confirmation"] for c in await listed(app, toolId="run_command", status="success")] == [
        "chatGrant", "userChat"]
    assert len(await listed(app, confirmation="userDenied", chatId=chat)) == 1
    assert await listed(app, provider="mcp") == []
    assert await listed(app, chatId=await new_chat(app, "other")) == []
    with_results = await listed(app, startedBy="api", withResults=True)
    assert with_results[0]["result"] and with_results[0]["renderPlan"]


async def test_pages_are_newest_first_disjoint_and_hold_still_while_calls_are_added(app: SidecarClient):
    chat = await new_chat(app)

    async def write(n: int) -> str:
        got = await app.request("tools/call", {"chatId": chat, "toolId": "write_file",
                                               "args": {"path": f"{n}.txt", "content": str(n)}})
        return got["toolCall"]["id"]

    made = [await write(n) for n in range(7)]
    first = await app.request("toolCalls/list", {"chatId": chat, "pageSize": 3})
    assert [c["id"] for c in first["toolCalls"]] == made[::-1][:3]
    await write(99)  # a newer call does not shift the pages after the first
    second = await app.request("toolCalls/list", {"chatId": chat, "pageSize": 3, "pageToken": first["nextPageToken"]})
    third = await app.request("toolCalls/list", {"chatId": chat, "pageSize": 3, "pageToken": second["nextPageToken"]})
    assert [c["id"] for c in second["toolCalls"] + third["toolCalls"]] == made[::-1][3:]
    assert "nextPageToken" not in third
    assert len(await everything(app, chatId=chat, pageSize=2)) == 8

    other = await app.request_raw("toolCalls/list", {"toolId": "read_file", "pageToken": first["nextPageToken"]})
    assert other["error"]["code"] == -32602 and "other filters" in other["error"]["data"]["reason"]
    junk = await app.request_raw("toolCalls/list", {"pageToken": "not-a-token"})
    assert junk["error"]["code"] == -32602 and junk["error"]["data"]["path"] == "params.pageToken"
    big = await app.request_raw("toolCalls/list", {"pageSize": 501})
    assert big["error"]["code"] == -32602


async def test_a_time_range_selects_calls_by_when_they_started(app: SidecarClient):
    chat = await new_chat(app)
    await app.request("tools/call", {"chatId": chat, "toolId": "write_file", "args": {"path": "a", "content": "1"}})
    await anyio.sleep(0.01)
    later = (await app.request("tools/call", {"chatId": chat, "toolId": "write_file",
                                              "args": {"path": "b", "content": "2"}}))["toolCall"]
    start = later["startedAt"]
    assert [c["id"] for c in await listed(app, since=start)] == [later["id"]]
    assert len(await listed(app, until=start)) == 1
    in_paris = datetime.fromisoformat(start).astimezone(timezone(timedelta(hours=1))).isoformat()
    assert in_paris.endswith("+01:00")  # the same instant in another zone
    assert len(await listed(app, since="2000-01-01", until=in_paris)) == 1
    assert await listed(app, until="2000-01-01") == []
    for bad, why in (({"since": "yesterday"}, "ISO 8601"), ({"since": "2026-11-23T10:00:00"}, "timezone"),
                     ({"since": "2026-11-23", "until": "2026-11-22"}, "later than")):
        got = await app.request_raw("toolCalls/list", bad)
        assert got["error"]["code"] == -32602 and why in got["error"]["data"]["reason"], got


async def test_secrets_are_masked_in_the_list_and_in_exports(app: SidecarClient, tmp_path: Path):
    await app.request("secrets/set", {"name": "SHOP_PASSWORD", "value": SECRET})
    await app.request("tools/list")
    chat = await new_chat(app)
    content = f"password is {SECRET}; key sk-proj-abcdefghijklmnop1234"
    await app.request("tools/call", {"chatId": chat, "toolId": "write_file",
                                     "args": {"path": "s.txt", "content": content}})
    await app.request("tools/call", {"chatId": chat, "toolId": "read_file", "args": {"path": "s.txt"}})
    calls = await listed(app, chatId=chat, withResults=True)
    text = json.dumps(calls)
    assert "hunter2" not in text and "sk-proj" not in text and "****" in text
    assert calls[1]["args"]["path"] == "s.txt"  # what is no secret stays readable

    for fmt in ("jsonl", "csv"):
        out = tmp_path / f"calls.{fmt}"
        done = await app.request("toolCalls/export", {"chatId": chat, "path": str(out)})
        assert done == {"path": str(out), "count": 2, "format": fmt}
        written = out.read_text()
        assert "hunter2" not in written and "sk-proj" not in written and "****" in written


async def test_exports_write_every_selected_call_as_jsonl_or_csv(app: SidecarClient, tmp_path: Path):
    chat = await new_chat(app)
    ids = [(await app.request("tools/call", {"chatId": chat, "toolId": "write_file",
                                             "args": {"path": f"{n}.txt", "content": "=1+1"}}))["toolCall"]["id"]
           for n in range(3)]
    await app.request("tools/call", {"chatId": chat, "toolId": "read_file", "args": {"path": "0.txt"}})

    out = tmp_path / "calls.jsonl"
    out.write_text("an older export\n")
    got = await app.request("toolCalls/export", {"toolId": "write_file", "path": str(out)})
    assert got["count"] == 3 and got["format"] == "jsonl"
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [c["id"] for c in lines] == ids  # oldest first, the old file replaced whole
    assert all(c["startedBy"] == "api" and c["durationMs"] >= 0 and c["renderPlan"] for c in lines)

    sheet = tmp_path / "calls.csv"
    got = await app.request("toolCalls/export", {"chatId": chat, "path": str(sheet)})
    assert got["count"] == 4 and got["format"] == "csv"
    rows = list(csv.DictReader(sheet.open(newline="")))
    assert [r["toolId"] for r in rows] == ["write_file"] * 3 + ["read_file"]
    assert json.loads(rows[0]["args"]) == {"path": "0.txt", "content": "=1+1"}
    as_text = tmp_path / "calls.txt"
    assert (await app.request("toolCalls/export", {"path": str(as_text), "format": "csv"}))["format"] == "csv"
    assert as_text.read_text().startswith("id,startedAt,")
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".part")] == []


async def test_a_bad_export_path_says_what_to_fix_and_writes_nothing(app: SidecarClient, tmp_path: Path):
    (tmp_path / "folder").mkdir()
    for path, why in (("calls.jsonl", "relative"), (str(tmp_path / "folder"), "is a folder"),
                      (str(tmp_path / "missing" / "calls.jsonl"), "does not exist"), ("", "absolute path"),
                      (str(tmp_path / "data" / "sidecar.db"), "data directory"),
                      (str(tmp_path / "folder" / ".." / "data" / "calls.jsonl"), "data directory")):
        got = await app.request_raw("toolCalls/export", {"path": path})
        assert got["error"]["code"] == -32602, got
        assert got["error"]["data"]["path"] == "params.path" and why in got["error"]["data"]["reason"], got
    # A folder no one may create files in (sysfs refuses even root, who runs CI here).
    got = await app.request_raw("toolCalls/export", {"path": "/sys/calls.jsonl"})
    assert got["error"]["code"] == -32602 and "not writable" in got["error"]["data"]["reason"], got
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "folder"]
    assert list((tmp_path / "folder").iterdir()) == []


def test_a_csv_cell_that_a_spreadsheet_would_run_is_quoted():
    call = ToolCall(id="c", tool_id="t", args={}, status="error", started_at="2026-11-23T00:00:00.000000Z",
                    started_by="api", error='=HYPERLINK("http://evil.example","x")', error_kind="raised")
    row = next(csv.DictReader(io.StringIO(audit._csv_lines([call], header=True).decode())))
    assert row["error"] == '\'=HYPERLINK("http://evil.example","x")' and row["toolId"] == "t"


async def test_an_export_reports_its_progress_chunk_by_chunk(app: SidecarClient, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(audit, "EXPORT_CHUNK", 2)
    monkeypatch.setattr(audit, "PROGRESS_EVERY", 2)
    chat = await new_chat(app)
    for n in range(5):
        await app.request("tools/call", {"chatId": chat, "toolId": "write_file",
                                         "args": {"path": f"{n}.txt", "content": "x"}})
    done = await app.request("toolCalls/export", {"path": str(tmp_path / "c.jsonl"), "workDoneToken": "exp"})
    assert done["count"] == 5
    values = [n["params"]["value"] for n in app.notifications
              if n["method"] == "$/progress" and n["params"]["token"] == "exp"]
    assert [v["kind"] for v in values] == ["begin", "report", "report", "report", "end"]
    assert [v.get("message") for v in values[1:4]] == ["2 of 5 calls", "4 of 5 calls", "5 of 5 calls"]
    assert values[3]["percentage"] == 100


async def test_an_export_that_fails_halfway_leaves_the_old_file_and_no_part(app: SidecarClient, tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch):
    chat = await new_chat(app)
    for n in range(4):
        await app.request("tools/call", {"chatId": chat, "toolId": "write_file",
                                         "args": {"path": f"{n}.txt", "content": "x"}})
    monkeypatch.setattr(audit, "EXPORT_CHUNK", 1)
    encoded = audit._encoded
    chunks: list[int] = []

    def failing(calls: list[ToolCall], fmt: Any) -> bytes:
        chunks.append(len(calls))
        if len(chunks) == 3:
            raise OSError(28, "No space left on device")  # as if the disk filled up on the third chunk
        return encoded(calls, fmt)

    monkeypatch.setattr(audit, "_encoded", failing)
    out = tmp_path / "calls.jsonl"
    out.write_text("the previous export\n")
    got = await app.request_raw("toolCalls/export", {"path": str(out)})
    assert "error" in got and len(chunks) == 3
    assert out.read_text() == "the previous export\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["calls.jsonl", "data"]

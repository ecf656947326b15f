"""tools/call through the real process: built-ins and Python tools in a chat's workspace."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import anyio
import pytest

from sidecar.client import RemoteError, SidecarClient
from tests.chromium import HOSTILE, PROBE_PAGE, probe

pytestmark = pytest.mark.anyio

EXAMPLE = Path(__file__).resolve().parents[1] / "fixtures" / "toolsets" / "app-builder"

FLAKY = '''
  - id: half_done
    entrypoint: tools.flaky:half_done
  - id: hang
    entrypoint: tools.flaky:hang
    timeout: 1
  - id: die
    entrypoint: tools.flaky:die
  - id: nested
    entrypoint: tools.flaky:nested
  - id: echo
    entrypoint: tools.flaky:echo
    renderer:
      type: html
      artifact: artifacts/probe.html
      data: "$return"
  - id: bulk
    entrypoint: tools.flaky:bulk
  - id: swap_artifact
    entrypoint: tools.flaky:swap_artifact
'''

FLAKY_PY = '''
import os, time
from covalt_toolset import get_context, tool

@tool
def half_done(name: str) -> dict:
    """Writes a file, then fails."""
    (get_context().workspace / name).write_text("partial")
    raise RuntimeError("disk quota exceeded halfway")

@tool
def hang() -> None:
    time.sleep(60)

@tool
def die() -> None:
    os._exit(9)

@tool
def nested(depth: int) -> list:
    value = []
    for _ in range(depth):
        value = [value]
    return value

@tool
def echo(value: dict) -> dict:
    return value

@tool
def bulk(rows: int) -> dict:
    return bulk_value(rows)

@tool
def swap_artifact(target: str) -> str:
    """Replaces the echo tool's page with a symlink to ``target``."""
    page = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "artifacts", "probe.html")
    os.replace(page, page + ".bak")
    os.symlink(target, page)
    return page

def bulk_value(rows: int) -> dict:
    # Escapes, non-ASCII, numbers of all kinds, nesting and null: all that JSON has to carry.
    return {"rows": [{"n": i, "half": i / 2, "even": i % 2 == 0,
                      "text": "résumé ✓" + chr(34) + str(i) + chr(92) + chr(10) + chr(9) + chr(0)}
                     for i in range(rows)], "none": None}
'''


async def chat(sidecar: SidecarClient) -> str:
    return (await sidecar.request("chats/create", {"title": "t"}))["chat"]["id"]


async def call(sidecar: SidecarClient, tool: str, args: dict, chat_id: str | None = None) -> dict:
    params = {"toolId": tool, "args": args} | ({"chatId": chat_id} if chat_id else {})
    return (await sidecar.request("tools/call", params))["toolCall"]


async def error_of(sidecar: SidecarClient, params: dict) -> dict:
    with pytest.raises(RemoteError) as info:
        await sidecar.request("tools/call", params)
    return {"code": info.value.code, "message": info.value.message, "data": info.value.data}


async def install(sidecar: SidecarClient, tmp_path: Path) -> Path:
    folder = tmp_path / "app-builder"
    shutil.copytree(EXAMPLE, folder)
    text = (folder / "toolset.yaml").read_text().replace("\ntool_overrides:", FLAKY + "\ntool_overrides:", 1)
    (folder / "toolset.yaml").write_text(text)
    (folder / "tools" / "flaky.py").write_text(FLAKY_PY)
    # The trap: a "</head>" in a comment of the head is no place for the data.
    (folder / "artifacts" / "probe.html").write_text(PROBE_PAGE.replace("<head>", "<head><!-- </head> -->"))
    await sidecar.request("toolsets/import", {"path": str(folder)})
    return folder


async def test_builtins_are_listed_and_read_only_except_enabled(sidecar: SidecarClient):
    tools = {t["id"]: t for t in (await sidecar.request("tools/list"))["tools"]}
    for name in ("write_file", "read_file", "list_files", "delete_file", "run_command"):
        assert tools[name]["provider"] == "builtin" and tools[name]["renderer"]
    assert tools["run_command"]["requiresConfirmation"] is True
    with pytest.raises(RemoteError) as info:
        await sidecar.request("tools/setOverride", {"toolsetId": "builtin", "toolId": "write_file",
                                                    "descriptionOverride": "mine"})
    assert info.value.code == -32012 and "read-only" in info.value.message
    off = await sidecar.request("tools/setOverride", {"toolsetId": "builtin", "toolId": "write_file",
                                                      "enabled": False})
    assert off["tool"]["enabled"] is False
    chat_id = await chat(sidecar)
    err = await error_of(sidecar, {"toolId": "write_file", "args": {"path": "a", "content": "b"}, "chatId": chat_id})
    assert err["code"] == -32011 and "disabled" in err["message"]


async def test_builtin_write_in_a_chat_is_a_new_workspace_version(sidecar: SidecarClient):
    chat_id = await chat(sidecar)
    tc = await call(sidecar, "write_file", {"path": "site/index.html", "content": "<h1>hi</h1>"}, chat_id)
    assert tc["status"] == "success" and tc["result"]["created"] is True
    assert tc["postManifestId"] and tc["postManifestId"] != tc.get("preManifestId")
    assert tc["renderPlan"]["renderer"] == "code" and tc["renderPlan"]["config"]["file"] == "site/index.html"
    files = await sidecar.request("workspace/files", {"chatId": chat_id})
    assert [f["path"] for f in files["files"]] == ["site/index.html"]
    again = await call(sidecar, "read_file", {"path": "site/index.html"}, chat_id)
    assert again["result"]["content"] == "<h1>hi</h1>"
    assert again["preManifestId"] == again["postManifestId"] == tc["postManifestId"]  # nothing changed


async def test_bad_arguments_and_missing_things_are_refused_before_running(sidecar: SidecarClient):
    chat_id = await chat(sidecar)
    err = await error_of(sidecar, {"toolId": "write_file", "args": {"path": "a"}, "chatId": chat_id})
    assert err["code"] == -32602 and err["data"]["path"] == "params.args.content"
    err = await error_of(sidecar, {"toolId": "write_file", "args": {"path": 5, "content": ""}, "chatId": chat_id})
    assert err["data"]["path"] == "params.args.path"
    err = await error_of(sidecar, {"toolId": "write_file", "args": {"path": "a", "content": "", "mode": 1},
                                   "chatId": chat_id})
    assert err["data"]["path"] == "params.args.mode"
    err = await error_of(sidecar, {"toolId": "write_file", "args": {"path": "a", "content": "b"}})
    assert err["data"]["path"] == "params.chatId"
    err = await error_of(sidecar, {"toolId": "no_such_tool", "args": {}})
    assert err["code"] == -32010 and err["data"]["kind"] == "tool"
    err = await error_of(sidecar, {"toolId": "list_files", "args": {}, "chatId": "nope"})
    assert err["code"] == -32010 and err["data"]["kind"] == "chat"
    assert (await sidecar.request("workspace/files", {"chatId": chat_id}))["files"] == []


async def test_path_escape_is_an_error_on_the_call_not_on_the_disk(sidecar: SidecarClient, data_dir: Path):
    chat_id = await chat(sidecar)
    tc = await call(sidecar, "write_file", {"path": "../../escape.txt", "content": "x"}, chat_id)
    assert tc["status"] == "error" and "'..'" in tc["error"]
    assert not [p async for p in anyio.Path(data_dir).rglob("escape.txt")]


async def test_python_tools_run_in_the_chat_workspace(sidecar: SidecarClient, tmp_path: Path):
    folder = await install(sidecar, tmp_path)
    chat_id = await chat(sidecar)
    wrote = await call(sidecar, "app-builder:write_file", {"path": "notes.txt", "content": "the cat saw the dog"},
                       chat_id)
    assert wrote["status"] == "success" and wrote["result"] == {"written": "notes.txt", "size": 19}
    stats = await call(sidecar, "app-builder:word_stats", {"path": "notes.txt", "top": 1}, chat_id)
    assert stats["status"] == "success" and stats["result"]["top"] == [["the", 2]]
    plan = stats["renderPlan"]
    assert plan["renderer"] == "html" and plan["config"]["data"] == stats["result"]
    artifact = Path(plan["config"]["artifact"])
    assert artifact.name == "stats.html" and await anyio.Path(artifact).is_file() and folder not in artifact.parents
    err = await error_of(sidecar, {"toolId": "app-builder:word_stats", "args": {"path": "notes.txt", "top": "x"},
                                   "chatId": chat_id})
    assert err["data"]["path"] == "params.args.top"
    tools = {t["id"]: t for t in (await sidecar.request("tools/list"))["tools"]}
    assert tools["app-builder:word_stats"]["inputSchema"]["properties"]["top"]["type"] == "integer"
    assert tools["app-builder:word_stats"]["name"] == "Word Stats"


async def test_a_failing_tool_keeps_its_partial_files_and_the_sidecar_serves_on(sidecar: SidecarClient, tmp_path: Path):
    await install(sidecar, tmp_path)
    chat_id = await chat(sidecar)
    failed = await call(sidecar, "app-builder:half_done", {"name": "out.txt"}, chat_id)
    assert failed["status"] == "error" and failed["errorKind"] == "raised"
    assert "disk quota exceeded halfway" in failed["error"]
    content = await sidecar.request("workspace/readFile", {"chatId": chat_id, "path": "out.txt",
                                                           "manifestId": failed["postManifestId"]})
    assert content["text"] == "partial"

    hung = await call(sidecar, "app-builder:hang", {}, chat_id)
    assert hung["status"] == "error" and hung["errorKind"] == "timeout"
    died = await call(sidecar, "app-builder:die", {}, chat_id)
    assert died["status"] == "error" and died["errorKind"] == "crashed"
    assert await sidecar.request("ping") == {}
    ok = await call(sidecar, "app-builder:read_file", {"path": "out.txt"}, chat_id)
    assert ok["status"] == "success" and ok["result"]["content"] == "partial"


async def test_a_deeply_nested_result_is_an_error_on_its_call(sidecar: SidecarClient, tmp_path: Path):
    await install(sidecar, tmp_path)
    chat_id = await chat(sidecar)
    deep = await call(sidecar, "app-builder:nested", {"depth": 990}, chat_id)
    assert deep["status"] == "error" and deep["errorKind"] == "output"
    assert "nested" in deep["error"]
    assert await sidecar.request("ping") == {}
    ok = await call(sidecar, "app-builder:nested", {"depth": 3}, chat_id)
    assert ok["status"] == "success" and ok["result"] == [[[[]]]]


async def test_authoring_loop_reloads_saved_edits_and_keeps_the_last_good_version(
        sidecar: SidecarClient, tmp_path: Path):
    folder = tmp_path / "app-builder"
    shutil.copytree(EXAMPLE, folder)
    await sidecar.request("toolsets/import", {"path": str(folder)})
    chat_id = await chat(sidecar)
    await call(sidecar, "app-builder:write_file", {"path": "t.txt", "content": "a b a"}, chat_id)
    await sidecar.wait_for(lambda: True, 0.3)  # let the watcher settle before the first edit

    stats = folder / "tools" / "stats.py"
    stats.write_text(stats.read_text().replace('"path": path,', '"path": path, "version": 2,'))
    note = await sidecar.wait_notification("toolsets/changed", lambda p: p["change"] == "reloaded")
    assert note["params"]["toolset"]["id"] == "app-builder"
    assert (await call(sidecar, "app-builder:word_stats", {"path": "t.txt"}, chat_id))["result"]["version"] == 2

    sidecar.notifications.clear()
    stats.write_text("def word_stats(:\n")  # a syntax error mid-edit
    failed = await sidecar.wait_notification("toolsets/changed", lambda p: p["change"] == "reloadFailed")
    assert "tools/stats.py" in failed["params"]["error"]
    kept = await call(sidecar, "app-builder:word_stats", {"path": "t.txt"}, chat_id)
    assert kept["status"] == "success" and kept["result"]["version"] == 2

    sidecar.notifications.clear()
    manifest = folder / "toolset.yaml"
    manifest.write_text(manifest.read_text().replace("name: App Builder", "name: App Builder II")
                        .replace("  - id: word_stats\n    entrypoint: tools.stats:word_stats\n", ""))
    note = await sidecar.wait_notification("toolsets/changed", lambda p: p["change"] == "reloaded")
    assert note["params"]["toolset"]["name"] == "App Builder II"
    ids = [t["id"] for t in (await sidecar.request("tools/list"))["tools"]]
    assert "app-builder:word_stats" not in ids and "app-builder:read_file" in ids


async def test_html_page_of_a_real_call_keeps_hostile_data_inside_the_script(sidecar: SidecarClient, tmp_path: Path):
    await install(sidecar, tmp_path)
    tc = await call(sidecar, "app-builder:echo", {"value": HOSTILE})
    assert tc["status"] == "success" and tc["renderPlan"]["renderer"] == "html"
    page = (await sidecar.request("tools/htmlPage", {"toolCallId": tc["id"]}))["html"]
    data, pwned = await anyio.to_thread.run_sync(probe, page, tmp_path)
    assert data == HOSTILE and pwned == "undefined"

    # An upgrade replaces the revision folder the plan named; the page still opens.
    await sidecar.request("toolsets/import", {"path": str(tmp_path / "app-builder"), "replace": True})
    again = (await sidecar.request("tools/htmlPage", {"toolCallId": tc["id"]}))["html"]
    assert again == page
    with pytest.raises(RemoteError) as info:
        await sidecar.request("tools/htmlPage", {"toolCallId": "nope"})
    assert info.value.code == -32010


async def test_html_page_never_serves_an_artifact_a_tool_replaced_with_a_symlink(
        sidecar: SidecarClient, tmp_path: Path):
    await install(sidecar, tmp_path)
    tc = await call(sidecar, "app-builder:echo", {"value": {"n": 1}})
    assert "__TOOL_DATA__" in (await sidecar.request("tools/htmlPage", {"toolCallId": tc["id"]}))["html"]
    secret = tmp_path / "outside.txt"
    secret.write_text("root:x:0:0:not-for-the-page")
    # The sandbox keeps the toolset's folder read-only to its own tools...
    refused = await call(sidecar, "app-builder:swap_artifact", {"target": str(secret)})
    assert refused["status"] == "error" and "Read-only file system" in refused["error"], refused
    # ...so the link is planted from outside, as anything else writing there could.
    data_dir = Path((await sidecar.request("debug/info"))["dataDir"])
    page = next(data_dir.glob("**/app-builder*/**/artifacts/probe.html"))
    page.rename(str(page) + ".bak")
    page.symlink_to(secret)
    with pytest.raises(RemoteError) as info:
        await sidecar.request("tools/htmlPage", {"toolCallId": tc["id"]})
    assert info.value.code == -32030
    assert "artifacts/probe.html is a symlink: it is not followed" in info.value.message
    assert "not-for-the-page" not in info.value.message
    # The same symlink planted before a call: the call gets no html plan, the page is refused.
    later = await call(sidecar, "app-builder:echo", {"value": {"n": 2}})
    assert later["status"] == "success" and "renderPlan" not in later
    # Put back, the page is served again.
    page.unlink()
    Path(str(page) + ".bak").rename(page)
    assert "__TOOL_DATA__" in (await sidecar.request("tools/htmlPage", {"toolCallId": tc["id"]}))["html"]


async def test_cancelling_a_call_stops_the_tool_and_keeps_the_chat_usable(sidecar: SidecarClient, tmp_path: Path):
    await install(sidecar, tmp_path)
    chat_id = await chat(sidecar)
    answer = sidecar.expect("slow")
    await sidecar.send({"jsonrpc": "2.0", "id": "slow", "method": "tools/call",
                        "params": {"toolId": "app-builder:hang", "args": {}, "chatId": chat_id}})
    await anyio.sleep(0.3)
    await sidecar.notify("$/cancelRequest", {"id": "slow"})
    reply = await answer(5)
    assert reply["error"]["code"] == -32800
    # The chat's lock was released and the toolset's next call gets a fresh worker.
    ok = await call(sidecar, "app-builder:write_file", {"path": "after.txt", "content": "x"}, chat_id)
    assert ok["status"] == "success"


async def test_calls_outside_a_chat_are_recorded_even_when_the_sidecar_stops_right_after(
        data_dir: Path, tmp_path: Path):
    # Their records are written after the reply; a read right away and a shutdown both see them.
    async with SidecarClient.spawn(data_dir) as sidecar:
        await install(sidecar, tmp_path)
        ids = [(await call(sidecar, "app-builder:echo", {"value": {"n": n}}))["id"] for n in range(25)]
        first = (await sidecar.request("tools/htmlPage", {"toolCallId": ids[0]}))["html"]
        assert '"n":0' in first.replace(" ", "")
        last = (await call(sidecar, "app-builder:echo", {"value": {"n": "last"}}))["id"]
    async with SidecarClient.spawn(data_dir) as again:
        for call_id in (*ids, last):
            assert (await again.request("tools/htmlPage", {"toolCallId": call_id}))["html"]


async def test_answers_larger_than_the_pipe_arrive_whole_between_small_ones(sidecar: SidecarClient):
    # A pipe takes 64 KiB at once: the rest of a big answer must go out before anything else.
    chat_id = await chat(sidecar)
    text = "".join(f"line {i:07d}\n" for i in range(250_000))  # 3.25 MB
    await call(sidecar, "write_file", {"path": "big.txt", "content": text}, chat_id)
    got: dict[str, object] = {}

    async def read(n: int) -> None:
        got[f"read{n}"] = await call(sidecar, "read_file", {"path": "big.txt", "limit": 4 << 20}, chat_id)

    async def ping(n: int) -> None:
        got[f"ping{n}"] = await sidecar.request("ping")

    async with anyio.create_task_group() as tg:
        for n in range(4):
            tg.start_soon(read, n)
            tg.start_soon(ping, n)
    for n in range(4):
        assert got[f"ping{n}"] == {}
        assert got[f"read{n}"]["result"]["content"] == text  # type: ignore[index]


async def test_a_15_mb_result_arrives_whole_and_correct_in_and_outside_a_chat(sidecar: SidecarClient, tmp_path: Path):
    # A big result is passed on as the worker wrote it: it must still be the very value the tool returned.
    await install(sidecar, tmp_path)
    scope: dict[str, Any] = {}
    exec("def tool(f):\n    return f\n" + FLAKY_PY.split("def bulk(", 1)[1].split("\n\n", 1)[1], scope)
    expected = scope["bulk_value"](200_000)
    assert len(json.dumps(expected, ensure_ascii=False, separators=(",", ":")).encode()) > 15 << 20
    chat_id = await chat(sidecar)
    got: dict[str, Any] = {}

    async def big(key: str, chat: str | None) -> None:
        got[key] = await call(sidecar, "app-builder:bulk", {"rows": 200_000}, chat)

    async with anyio.create_task_group() as tg:
        tg.start_soon(big, "alone", None)
        tg.start_soon(big, "chat", chat_id)
        for n in range(20):
            got[f"ping{n}"] = await sidecar.request("ping")
    for key in ("alone", "chat"):
        assert got[key]["status"] == "success", got[key].get("error")
        assert got[key]["result"] == expected
    assert all(got[f"ping{n}"] == {} for n in range(20))


async def test_a_call_in_a_chat_is_recorded_in_two_transactions_its_end_with_its_version(sidecar: SidecarClient):
    """Recorded as it starts, then its end in the transaction that adopts the workspace version it
    left (one trip to the database, not two), or alone when it changed nothing."""
    chat_id = await chat(sidecar)
    await call(sidecar, "write_file", {"path": "a.txt", "content": "1"}, chat_id)  # the workspace opens
    seen = []
    for content in ("2", "2"):  # a new version, then none
        before = (await sidecar.request("debug/info"))["dbTransactions"]
        tc = await call(sidecar, "write_file", {"path": "a.txt", "content": content}, chat_id)
        assert (await sidecar.request("debug/info"))["dbTransactions"] - before == 2
        seen.append(tc)
    assert seen[0]["postManifestId"] != seen[0]["preManifestId"]
    assert seen[1]["postManifestId"] == seen[1]["preManifestId"] == seen[0]["postManifestId"]
    stored = {c["id"]: c for c in (await sidecar.request("toolCalls/list", {"chatId": chat_id}))["toolCalls"]}
    for tc in seen:
        kept = stored[tc["id"]]
        assert kept["status"] == "success" and kept["postManifestId"] == tc["postManifestId"]
        assert kept["durationMs"] > 0 and kept["finishedAt"]
    files = await sidecar.request("workspace/files", {"chatId": chat_id})
    assert files["manifestId"] == seen[0]["postManifestId"]

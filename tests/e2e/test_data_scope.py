"""Data scope (issue 16 item 4, seed 004 "Safety Guardrails": every invocation scoped to its
conversation): a tool run from chat A is handed chat A's workspace, files and attachments, never
chat B's. What a tool process could reach on its own is the OS sandbox's part (issue 15); this is
what the sidecar hands it. (A chat's own settings, its "allow in this chat" grants, are scoped
the same way: tests/e2e/test_chat.py, test_confirmation_allow_chat_is_remembered_and_deny_tells_the_model.)"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from sidecar.client import RemoteError, SidecarClient
from tests.e2e.test_chat import EXAMPLE, events, new_chat, scripted, send

pytestmark = pytest.mark.anyio

MANIFEST = """manifest_version: "1"
id: probe
name: Probe
version: "1.0.0"
tools:
  - id: where
    entrypoint: tools.probe:where
  - id: linger
    entrypoint: tools.probe:linger
  - id: nap
    entrypoint: tools.probe:nap
"""

PROBE = '''
import os, threading, time
from covalt_toolset import get_context, tool

@tool
def where() -> dict:
    """What this call was handed: its folder, its chat, what it finds there."""
    ctx = get_context()
    return {"cwd": os.getcwd(), "workspace": str(ctx.workspace), "chatId": ctx.chat_id,
            "pid": f"{os.readlink('/proc/self/ns/pid')} {os.getppid()}",
            "files": sorted(os.listdir("."))}

@tool
def linger() -> dict:
    """Leaves a thread behind that keeps writing to the current folder for a while."""
    def write():
        for _ in range(100):
            with open("late.txt", "w") as f:
                f.write("from the chat before")
            time.sleep(0.02)
    threading.Thread(target=write, daemon=True).start()
    return {"pid": f"{os.readlink('/proc/self/ns/pid')} {os.getppid()}"}

@tool
def nap() -> dict:
    """Sleeps a little in the chat's folder."""
    time.sleep(0.5)
    return {"pid": f"{os.readlink('/proc/self/ns/pid')} {os.getppid()}"}
'''


async def install_probe(sc: SidecarClient, tmp_path: Path) -> None:
    folder = tmp_path / "probe"
    (folder / "tools").mkdir(parents=True)
    (folder / "toolset.yaml").write_text(MANIFEST)
    (folder / "tools" / "probe.py").write_text(PROBE)
    await sc.request("toolsets/import", {"path": str(folder)})


async def chat(sc: SidecarClient) -> dict[str, Any]:
    return (await sc.request("chats/create", {"title": "t"}))["chat"]


async def call(sc: SidecarClient, tool: str, args: dict[str, Any], chat_id: str | None = None) -> dict[str, Any]:
    params = {"toolId": tool, "args": args} | ({"chatId": chat_id} if chat_id else {})
    return (await sc.request("tools/call", params))["toolCall"]


async def files(sc: SidecarClient, chat_id: str) -> list[str]:
    return [f["path"] for f in (await sc.request("workspace/files", {"chatId": chat_id}))["files"]]


async def test_a_python_tool_is_handed_only_the_workspace_of_the_chat_it_runs_for(app: SidecarClient,
                                                                                     tmp_path: Path):
    await install_probe(app, tmp_path)
    a, b = await chat(app), await chat(app)
    await call(app, "write_file", {"path": "a-only.txt", "content": "A's"}, a["id"])
    await call(app, "write_file", {"path": "b-only.txt", "content": "B's"}, b["id"])

    seen = []
    for c, own in ((a, "a-only.txt"), (b, "b-only.txt"), (a, "a-only.txt")):
        result = (await call(app, "probe:where", {}, c["id"]))["result"]
        root = os.path.realpath(c["workspacePath"])
        assert os.path.realpath(result["cwd"]) == os.path.realpath(result["workspace"]) == root
        assert result["chatId"] == c["id"] and result["files"] == [own]
        seen.append(result["pid"])
    # A worker is sandboxed to one chat's workspace: chat B got its own, chat A's came back warm.
    assert seen[0] == seen[2] != seen[1]

    outside = (await call(app, "probe:where", {}))["result"]  # no chat: a scratch folder of its own
    assert outside["chatId"] is None and outside["files"] == []
    assert not {os.path.realpath(c["workspacePath"]) for c in (a, b)} & {os.path.realpath(outside["cwd"])}
    assert not os.path.exists(outside["cwd"])  # dropped after the call


async def test_a_thread_a_tool_left_in_one_chat_never_writes_into_the_next_chats_workspace(
        app: SidecarClient, tmp_path: Path):
    # A worker runs one call at a time and changes into each call's folder; a thread left running
    # by a call in chat A would write into chat B's folder if the worker served B next.
    await install_probe(app, tmp_path)
    a, b = await chat(app), await chat(app)
    left = await call(app, "probe:linger", {}, a["id"])
    napped = await call(app, "probe:nap", {}, b["id"])
    assert left["status"] == napped["status"] == "success"
    assert await files(app, b["id"]) == [] and os.listdir(b["workspacePath"]) == []
    assert napped["result"]["pid"] != left["result"]["pid"]  # another worker served chat B
    # Calls of the same chat still share the worker.
    first = await call(app, "probe:nap", {}, b["id"])
    assert first["result"]["pid"] == napped["result"]["pid"]


async def test_file_tools_of_one_chat_cannot_reach_another_chats_workspace(app: SidecarClient):
    a, b = await chat(app), await chat(app)
    await call(app, "write_file", {"path": "secret.txt", "content": "B's secret"}, b["id"])
    b_root = Path(b["workspacePath"])
    b_file = b_root / "secret.txt"
    for path in (f"../../{b['id']}/workspace/secret.txt", f"../{b['id']}/secret.txt", str(b_file),
                 "./../secret.txt", "x/../../secret.txt"):
        read = await call(app, "read_file", {"path": path}, a["id"])
        assert read["status"] == "error" and "B's secret" not in str(read), path

    # Links planted in A's folder (by a tool, or by hand) that lead into B's.
    a_root = Path(a["workspacePath"])
    (a_root / "link.txt").symlink_to(b_file)
    (a_root / "linkdir").symlink_to(b_root, target_is_directory=True)
    for tool, args in (("read_file", {"path": "link.txt"}), ("read_file", {"path": "linkdir/secret.txt"}),
                       ("write_file", {"path": "linkdir/planted.txt", "content": "x"}),
                       ("write_file", {"path": "link.txt", "content": "overwritten"}),
                       ("delete_file", {"path": "linkdir/secret.txt"}),
                       ("list_files", {"path": "linkdir"})):
        done = await call(app, tool, args, a["id"])
        assert done["status"] == "error" and "B's secret" not in str(done), (tool, args, done)
    listed = await call(app, "list_files", {}, a["id"])
    assert listed["status"] == "success" and listed["result"]["files"] == []
    # A's versions never take B's file in through the links, and B's folder is as it was.
    assert await files(app, a["id"]) == []
    assert await files(app, b["id"]) == ["secret.txt"] and b_file.read_text() == "B's secret"
    assert sorted(os.listdir(b_root)) == ["secret.txt"]
    removed = await call(app, "delete_file", {"path": "link.txt"}, a["id"])  # the link goes, not its target
    assert removed["status"] == "success" and b_file.read_text() == "B's secret"


async def test_a_toolset_attached_in_one_chat_is_not_offered_or_run_in_another(app: SidecarClient, tmp_path: Path):
    folder = tmp_path / "app-builder"
    shutil.copytree(EXAMPLE, folder)
    toolset = (await app.request("toolsets/import", {"path": str(folder)}))["toolset"]["id"]
    await app.request("toolsets/setEnabled", {"id": toolset, "enabled": False})
    tool = f"{toolset}:write_file"
    a, b = (await new_chat(app)), (await new_chat(app))
    ask = {"text": "x", "toolCalls": [{"tool": tool, "args": {"path": "w.txt", "content": "a b"}}]}
    pid = await scripted(app, "attach", ask, {"text": "done"}, ask, {"text": "done"})

    in_a = await send(app, a, "go", provider=pid, attachments=[{"kind": "toolset", "id": toolset}])
    [ran] = [e["event"]["toolCall"] for e in events(app, in_a["messageId"]) if e["event"]["kind"] == "toolCallFinished"]
    assert ran["status"] == "success" and await files(app, a) == ["w.txt"]
    shown_a = {t["id"] for t in (await app.request("tools/list", {"chatId": a}))["tools"]}
    assert tool in shown_a
    # The "+" palette of chat A runs it as A's model did (its branch attached the toolset).
    palette = await app.request("chat/invokeTool", {"chatId": a, "toolId": tool,
                                                    "args": {"path": "p.txt", "content": "c"}})
    assert palette["toolCall"]["status"] == "success" and await files(app, a) == ["p.txt", "w.txt"]

    shown_b = {t["id"] for t in (await app.request("tools/list", {"chatId": b}))["tools"]}
    assert tool not in shown_b
    in_b = await send(app, b, "go", provider=pid)
    [refused] = [e["event"]["toolCall"] for e in events(app, in_b["messageId"])
                 if e["event"]["kind"] == "toolCallFinished"]
    assert refused["errorKind"] == "unknown_tool"
    for method, params in (("tools/call", {"toolId": tool, "args": {"path": "w.txt", "content": "x"}, "chatId": b}),
                           ("chat/invokeTool", {"chatId": b, "toolId": tool, "args": {"path": "w.txt", "content": "x"}})):
        with pytest.raises(RemoteError) as info:
            await app.request(method, params)
        assert info.value.code == -32011 and "disabled" in info.value.message, method
    assert await files(app, b) == []


async def test_a_message_or_version_of_another_chat_cannot_be_built_on_or_read_from_this_one(app: SidecarClient):
    # A branch made from chat B's message, or a version of B's files, would bring B's workspace in.
    a, b = await chat(app), await chat(app)
    wrote = await call(app, "write_file", {"path": "s.txt", "content": "B's secret"}, b["id"])
    said = await send(app, b["id"], "hello")
    for method, params in (
            ("chat/send", {"chatId": a["id"], "content": "/tool read_file {\"path\": \"s.txt\"}",
                           "parentId": said["messageId"]}),
            ("chat/invokeTool", {"chatId": a["id"], "toolId": "read_file", "args": {"path": "s.txt"},
                                 "parentId": said["messageId"]}),
            ("workspace/readFile", {"chatId": a["id"], "path": "s.txt", "manifestId": wrote["postManifestId"]}),
            ("workspace/files", {"chatId": a["id"], "manifestId": wrote["postManifestId"]})):
        with pytest.raises(RemoteError) as info:
            await app.request(method, params)
        assert info.value.code == -32010 and "B's secret" not in info.value.message, method
    assert (await app.request("chats/get", {"id": a["id"]}))["messages"] == []
    assert await files(app, a["id"]) == []


async def test_calls_outside_a_chat_share_one_warm_worker_and_each_get_an_empty_folder(app: SidecarClient,
                                                                                     tmp_path: Path):
    # Each such call used to get a new folder and so a new sandboxed worker: a cold start (about
    # 100 ms) on every call from the "+" palette outside a chat.
    await install_probe(app, tmp_path)
    first = (await call(app, "probe:where", {}))["result"]
    second = (await call(app, "probe:where", {}))["result"]
    assert first["pid"] == second["pid"]
    assert first["cwd"] != second["cwd"] and first["files"] == second["files"] == []
    assert not os.path.exists(first["cwd"]) and not os.path.exists(second["cwd"])

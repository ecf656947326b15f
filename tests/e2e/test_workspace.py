"""Chats and their versioned workspaces, through the real process."""

from __future__ import annotations

import base64
import hashlib
import os
from pathlib import Path

import anyio
import pytest

from sidecar.client import SidecarClient

pytestmark = pytest.mark.anyio


async def new_chat(c: SidecarClient, title: str = "t") -> dict:
    return (await c.request("chats/create", {"title": title}))["chat"]


async def add(c: SidecarClient, chat_id: str, role: str, content: str, parent: str | None = None) -> dict:
    params = {"chatId": chat_id, "role": role, "content": content}
    if parent:
        params["parentId"] = parent
    return (await c.request("chats/addMessage", params))["message"]


async def write(c: SidecarClient, chat_id: str, path: str, text: str) -> str:
    return (await c.request("workspace/writeFile", {"chatId": chat_id, "path": path, "text": text}))["manifestId"]


def disk(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


async def expect_error(c: SidecarClient, code: int, method: str, params: dict) -> dict:
    reply = await c.request_raw(method, params)
    assert "error" in reply, reply
    assert reply["error"]["code"] == code, reply
    return reply["error"]


async def test_chat_lifecycle(sidecar: SidecarClient, data_dir: Path):
    chat = await new_chat(sidecar, "My chat")
    assert chat["title"] == "My chat" and "activeLeafId" not in chat
    assert Path(chat["workspacePath"]).parent == data_dir / "chats" / chat["id"]
    assert [c["id"] for c in (await sidecar.request("chats/list"))["chats"]] == [chat["id"]]
    await write(sidecar, chat["id"], "f.txt", "x")
    await sidecar.request("chats/delete", {"id": chat["id"]})
    assert not (data_dir / "chats" / chat["id"]).exists()
    assert (await sidecar.request("chats/list"))["chats"] == []
    for method, params in [("chats/get", {"id": chat["id"]}),
                           ("workspace/files", {"chatId": chat["id"]}),
                           ("chats/switchBranch", {"chatId": chat["id"], "messageId": "m"})]:
        error = await expect_error(sidecar, -32010, method, params)
        assert error["data"] == {"kind": "chat", "id": chat["id"]}


async def test_branches_carry_their_files_and_switching_restores_every_byte(sidecar: SidecarClient):
    chat = await new_chat(sidecar)
    cid, root = chat["id"], Path(chat["workspacePath"])
    await write(sidecar, cid, "notes.md", "before the question")
    question = await add(sidecar, cid, "user", "write me a script")
    answer_a = await add(sidecar, cid, "assistant", "here is version A")
    await write(sidecar, cid, "script.py", "print('A')\n")
    (root / "data.bin").write_bytes(os.urandom(3000) + b"\0\xff")  # binary, written by a "tool"
    (root / "empty.txt").write_bytes(b"")
    await sidecar.request("workspace/files", {"chatId": cid})  # saves what is on disk
    branch_a = disk(root)

    answer_b = await add(sidecar, cid, "assistant", "here is version B", parent=question["id"])
    assert disk(root) == {"notes.md": b"before the question"}  # B starts from the question's files
    await write(sidecar, cid, "script.py", "print('B')\n")
    await write(sidecar, cid, "lib/util.py", "x = 1\n")
    branch_b = disk(root)

    chat_a = (await sidecar.request("chats/switchBranch", {"chatId": cid, "messageId": answer_a["id"]}))["chat"]
    assert chat_a["activeLeafId"] == answer_a["id"]
    assert disk(root) == branch_a
    assert not (root / "lib").exists()
    await sidecar.request("chats/switchBranch", {"chatId": cid, "messageId": answer_b["id"]})
    assert disk(root) == branch_b
    # Picking the question shows its newest branch, down to the leaf.
    chat_q = (await sidecar.request("chats/switchBranch", {"chatId": cid, "messageId": question["id"]}))["chat"]
    assert chat_q["activeLeafId"] == answer_b["id"]

    messages = (await sidecar.request("chats/get", {"id": cid}))["messages"]
    by_id = {m["id"]: m for m in messages}
    assert by_id[answer_a["id"]]["parentId"] == by_id[answer_b["id"]]["parentId"] == question["id"]
    manifest_a = (await sidecar.request("workspace/manifest", {"chatId": cid, "messageId": answer_a["id"]}))["manifest"]
    assert set(manifest_a["files"]) == {"notes.md", "script.py", "data.bin", "empty.txt"}
    manifest_b = (await sidecar.request("workspace/manifest", {"chatId": cid, "messageId": answer_b["id"]}))["manifest"]
    changes = await sidecar.request("workspace/diff", {"chatId": cid, "from": manifest_a["id"], "to": manifest_b["id"]})
    assert changes == {"added": ["lib/util.py"], "removed": ["data.bin", "empty.txt"], "modified": ["script.py"]}


async def test_a_message_without_files_inherits_its_parents(sidecar: SidecarClient):
    chat = await new_chat(sidecar)
    cid = chat["id"]
    q = await add(sidecar, cid, "user", "q")
    assert (await sidecar.request("workspace/manifest", {"chatId": cid, "messageId": q["id"]})) == {}
    m1 = await write(sidecar, cid, "a.txt", "1")
    a = await add(sidecar, cid, "assistant", "a")
    assert "manifestId" not in a  # nothing changed during it: it inherits
    got = await sidecar.request("workspace/manifest", {"chatId": cid, "messageId": a["id"]})
    assert got["manifest"]["id"] == m1


async def test_outside_edits_are_saved_and_announced_but_our_own_writes_are_not(sidecar: SidecarClient):
    chat = await new_chat(sidecar)
    cid, root = chat["id"], Path(chat["workspacePath"])
    first = await write(sidecar, cid, "mine.txt", "written through the sidecar")
    await anyio.sleep(1.0)  # longer than the watcher's debounce
    assert not [n for n in sidecar.notifications if n["method"] == "workspace/changed"]
    (root / "mine.txt").write_text("edited in an editor")
    (root / "new folder").mkdir()
    (root / "new folder" / "added.txt").write_text("new")
    changed = await sidecar.wait_notification("workspace/changed", timeout=10)
    params = changed["params"]
    assert params["chatId"] == cid and params["manifestId"] != first
    assert params["changed"] == {"added": ["new folder/added.txt"], "removed": [], "modified": ["mine.txt"]}
    m = (await sidecar.request("workspace/manifest", {"chatId": cid, "manifestId": params["manifestId"]}))["manifest"]
    assert m["source"] == "edit" and m["parentId"] == first
    read = await sidecar.request("workspace/readFile", {"chatId": cid, "path": "mine.txt", "manifestId": first})
    assert read["text"] == "written through the sidecar"  # the old version is kept


async def test_an_outside_edit_stays_with_the_branch_it_was_made_on(sidecar: SidecarClient):
    chat = await new_chat(sidecar)
    cid, root = chat["id"], Path(chat["workspacePath"])
    q = await add(sidecar, cid, "user", "q")
    a = await add(sidecar, cid, "assistant", "a")
    await write(sidecar, cid, "f.txt", "from a")
    b = await add(sidecar, cid, "assistant", "b", parent=q["id"])
    await sidecar.request("chats/switchBranch", {"chatId": cid, "messageId": a["id"]})
    (root / "f.txt").write_text("edited while on a")  # switch away before the watcher settles
    await sidecar.request("chats/switchBranch", {"chatId": cid, "messageId": b["id"]})
    assert not (root / "f.txt").exists()
    await sidecar.request("chats/switchBranch", {"chatId": cid, "messageId": a["id"]})
    assert (root / "f.txt").read_text() == "edited while on a"


async def test_read_file_text_base64_and_limits(sidecar: SidecarClient):
    cid = (await new_chat(sidecar))["id"]
    blob = bytes(range(256))
    await sidecar.request("workspace/writeFile", {"chatId": cid, "path": "b.bin", "base64": base64.b64encode(blob).decode()})
    await write(sidecar, cid, "t.txt", "héllo\n")
    got = await sidecar.request("workspace/readFile", {"chatId": cid, "path": "b.bin"})
    assert base64.b64decode(got["base64"]) == blob and "text" not in got
    assert got["sha256"] == hashlib.sha256(blob).hexdigest() and got["size"] == 256
    assert (await sidecar.request("workspace/readFile", {"chatId": cid, "path": "t.txt"}))["text"] == "héllo\n"
    error = await expect_error(sidecar, -32602, "workspace/readFile", {"chatId": cid, "path": "b.bin", "maxBytes": 100})
    assert "256 bytes" in error["message"] and "maxBytes" in error["message"]
    await expect_error(sidecar, -32010, "workspace/readFile", {"chatId": cid, "path": "nope.txt"})
    await write(sidecar, cid, "dir/x.txt", "x")
    assert "directory" in (await expect_error(sidecar, -32602, "workspace/readFile", {"chatId": cid, "path": "dir"}))["message"]
    files = (await sidecar.request("workspace/files", {"chatId": cid}))["files"]
    assert [(f["path"], f["size"]) for f in files] == [("b.bin", 256), ("dir/x.txt", 1), ("t.txt", 7)]


@pytest.mark.parametrize("bad", ["../x", "a/../../x", "/etc/passwd", "C:\\x", "\\\\server\\x", "x\x00y", "a\nb"])
async def test_hostile_paths_are_refused_everywhere(sidecar: SidecarClient, bad: str, data_dir: Path):
    cid = (await new_chat(sidecar))["id"]
    for method, params in [
        ("workspace/readFile", {"chatId": cid, "path": bad}),
        ("workspace/writeFile", {"chatId": cid, "path": bad, "text": "pwned"}),
        ("workspace/upload", {"chatId": cid, "paths": [], "dest": bad}),
    ]:
        error = await expect_error(sidecar, -32602, method, params)
        assert error["data"]["path"] in ("params.path", "params.dest")
    assert not any(p.name == "x" for p in data_dir.parent.rglob("x"))


async def test_writes_through_a_symlink_out_of_the_workspace_are_refused(sidecar: SidecarClient, tmp_path: Path):
    chat = await new_chat(sidecar)
    cid, root = chat["id"], Path(chat["workspacePath"])
    await write(sidecar, cid, "a.txt", "a")
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, root / "escape")
    error = await expect_error(sidecar, -32602, "workspace/writeFile", {"chatId": cid, "path": "escape/p.txt", "text": "x"})
    assert "symbolic link" in error["message"]
    assert list(outside.iterdir()) == []
    files = (await sidecar.request("workspace/files", {"chatId": cid}))["files"]
    assert [f["path"] for f in files] == ["a.txt"]  # the link is not followed into the manifest


async def test_upload_copies_files_and_folders_but_not_links(sidecar: SidecarClient, tmp_path: Path):
    chat = await new_chat(sidecar)
    cid, root = chat["id"], Path(chat["workspacePath"])
    src = tmp_path / "src"
    (src / "proj" / "sub").mkdir(parents=True)
    (src / "proj" / "main.py").write_text("main")
    (src / "proj" / "sub" / "deep.txt").write_text("deep")
    os.symlink("/etc/passwd", src / "proj" / "passwd-link")
    (src / "single.csv").write_text("a,b\n")
    got = await sidecar.request("workspace/upload", {"chatId": cid, "paths": [str(src / "proj"), str(src / "single.csv")], "dest": "in"})
    assert got["added"] == ["in/proj/main.py", "in/proj/sub/deep.txt", "in/single.csv"]
    m = (await sidecar.request("workspace/manifest", {"chatId": cid}))["manifest"]
    assert m["source"] == "user_upload" and m["id"] == got["manifestId"]
    assert (root / "in/proj/sub/deep.txt").read_text() == "deep"
    assert not (root / "in/proj/passwd-link").exists()
    await expect_error(sidecar, -32602, "workspace/upload", {"chatId": cid, "paths": ["relative.txt"]})
    await expect_error(sidecar, -32602, "workspace/upload", {"chatId": cid, "paths": [str(tmp_path / "missing")]})


async def test_a_missing_blob_is_a_storage_error_that_names_it_and_nothing_else_breaks(sidecar: SidecarClient, data_dir: Path):
    chat = await new_chat(sidecar)
    cid = chat["id"]
    m1 = await write(sidecar, cid, "a.txt", "precious")
    sha = (await sidecar.request("workspace/files", {"chatId": cid}))["files"][0]["sha256"]
    blob = data_dir / "chats" / cid / "blobs" / sha[:2] / sha
    blob.chmod(0o644)
    blob.unlink()
    error = await expect_error(sidecar, -32030, "workspace/readFile", {"chatId": cid, "path": "a.txt", "manifestId": m1})
    assert sha in error["message"]
    other = (await new_chat(sidecar))["id"]
    await write(sidecar, other, "b.txt", "fine")
    assert (await sidecar.request("workspace/readFile", {"chatId": other, "path": "b.txt"}))["text"] == "fine"


async def test_gc_removes_only_unreferenced_blobs(sidecar: SidecarClient, data_dir: Path):
    cid = (await new_chat(sidecar))["id"]
    await write(sidecar, cid, "a.txt", "kept in history")
    await write(sidecar, cid, "a.txt", "current")
    orphan_dir = data_dir / "chats" / cid / "blobs" / "ff"
    orphan_dir.mkdir(exist_ok=True)
    (orphan_dir / ("f" * 64)).write_bytes(b"left by a crash between blob write and manifest insert")
    got = await sidecar.request("workspace/gc", {"chatId": cid})
    assert got["removedBlobs"] == 1 and got["freedBytes"] > 0
    history = (await sidecar.request("workspace/manifest", {"chatId": cid}))["manifest"]["parentId"]
    old = await sidecar.request("workspace/readFile", {"chatId": cid, "path": "a.txt", "manifestId": history})
    assert old["text"] == "kept in history"


async def test_operations_on_one_chat_never_interleave(sidecar: SidecarClient):
    cid = (await new_chat(sidecar))["id"]
    results: list[str] = []

    async def writer(i: int) -> None:
        results.append(await write(sidecar, cid, f"f{i}.txt", str(i)))

    async with anyio.create_task_group() as tg:
        for i in range(20):
            tg.start_soon(writer, i)
    files = (await sidecar.request("workspace/files", {"chatId": cid}))["files"]
    assert len(files) == 20 and len(set(results)) == 20  # each write its own version, none lost


async def test_the_workspace_survives_a_restart(data_dir: Path):
    async with SidecarClient.spawn(data_dir) as c:
        cid = (await new_chat(c))["id"]
        await write(c, cid, "kept.txt", "across restarts")
    async with SidecarClient.spawn(data_dir) as c:
        assert (await c.request("workspace/readFile", {"chatId": cid, "path": "kept.txt"}))["text"] == "across restarts"


async def test_unknown_manifest_and_message_ids_are_not_found(sidecar: SidecarClient):
    cid = (await new_chat(sidecar))["id"]
    error = await expect_error(sidecar, -32010, "workspace/files", {"chatId": cid, "manifestId": "nope"})
    assert error["data"] == {"kind": "manifest", "id": "nope"}
    await expect_error(sidecar, -32010, "workspace/manifest", {"chatId": cid, "messageId": "nope"})
    await expect_error(sidecar, -32010, "workspace/diff", {"chatId": cid, "from": "a", "to": "b"})
    await expect_error(sidecar, -32010, "chats/addMessage",
                       {"chatId": cid, "role": "user", "content": "x", "parentId": "nope"})


async def test_a_large_file_is_streamed_not_loaded(sidecar: SidecarClient):
    chat = await new_chat(sidecar)
    cid, root = chat["id"], Path(chat["workspacePath"])
    await write(sidecar, cid, "small.txt", "s")
    size = 256 << 20
    with open(root / "big.bin", "wb") as f:
        f.truncate(size)  # sparse on disk, but read and hashed in full
    files = (await sidecar.request("workspace/files", {"chatId": cid}))["files"]
    big = next(f for f in files if f["path"] == "big.bin")
    assert big["size"] == size
    assert big["sha256"] == hashlib.sha256(bytes(size)).hexdigest()
    info = await sidecar.request("debug/info")
    assert info["rssBytes"] < 150 << 20, info["rssBytes"]
    error = await expect_error(sidecar, -32602, "workspace/readFile", {"chatId": cid, "path": "big.bin"})
    assert str(size) in error["message"]


async def test_upload_never_writes_through_a_link_in_the_workspace(sidecar: SidecarClient, tmp_path: Path):
    chat = await new_chat(sidecar)
    cid, root = chat["id"], Path(chat["workspacePath"])
    await write(sidecar, cid, "a.txt", "a")
    victim = tmp_path / "victim.txt"
    victim.write_text("must stay")
    os.symlink(victim, root / "report.csv")
    src = tmp_path / "report.csv"
    src.write_text("uploaded")
    await sidecar.request("workspace/upload", {"chatId": cid, "paths": [str(src)]})
    assert victim.read_text() == "must stay"
    assert (root / "report.csv").read_text() == "uploaded" and not (root / "report.csv").is_symlink()

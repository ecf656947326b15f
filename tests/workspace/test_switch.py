"""A branch switch that fails part way (here: a blob of the target is gone from the store) leaves
the folder half one branch, half the other. The next use of the chat finishes the switch, or goes
back to the branch it left when the target cannot be written; never is the half folder saved as an
edit of the branch being left."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from sidecar.client import RemoteError, SidecarClient

pytestmark = pytest.mark.anyio


def on_disk(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in root.rglob("*") if p.is_file()}


async def two_branches(c: SidecarClient) -> tuple[str, Path, dict, dict]:
    """A chat with branches a and b (60 files each, 30 names shared), on b."""
    chat = (await c.request("chats/create", {"title": "t"}))["chat"]
    cid, root = chat["id"], Path(chat["workspacePath"])
    q = (await c.request("chats/addMessage", {"chatId": cid, "role": "user", "content": "q"}))["message"]
    branches = {}
    for name, parent, start in [("a", None, 0), ("b", q["id"], 30)]:
        params = {"chatId": cid, "role": "assistant", "content": name}
        if parent:
            params["parentId"] = parent
        message = (await c.request("chats/addMessage", params))["message"]
        for i in range(start, start + 60):
            (root / f"d{i % 4}").mkdir(exist_ok=True)
            (root / f"d{i % 4}" / f"f{i}.txt").write_text(f"{name} {i}\n")
        await c.request("workspace/files", {"chatId": cid})
        manifest = (await c.request("workspace/manifest", {"chatId": cid, "messageId": message["id"]}))["manifest"]
        branches[name] = {"id": message["id"], "manifest": manifest}
    return cid, root, branches["a"], branches["b"]


async def position(c: SidecarClient, cid: str, a: dict, b: dict) -> str:
    await c.request("workspace/files", {"chatId": cid})  # the first use of the chat after the failure
    for branch in (a, b):  # neither branch got an "edit" version
        got = await c.request("workspace/manifest", {"chatId": cid, "messageId": branch["id"]})
        assert got["manifest"]["id"] == branch["manifest"]["id"]
    return (await c.request("chats/get", {"id": cid}))["chat"]["activeLeafId"]


async def test_a_switch_that_fails_part_way_is_finished_by_the_next_use(app: SidecarClient, data_dir: Path):
    cid, root, a, b = await two_branches(app)
    sha = a["manifest"]["files"]["d3/f7.txt"]
    blob = data_dir / "chats" / cid / "blobs" / sha[:2] / sha
    kept = blob.read_bytes()
    blob.unlink()
    with pytest.raises(RemoteError) as failed:
        await app.request("chats/switchBranch", {"chatId": cid, "messageId": a["id"]})
    assert failed.value.code == -32030 and "blob" in failed.value.message
    assert on_disk(root) not in (a["manifest"]["files"], b["manifest"]["files"])  # half and half
    blob.write_bytes(kept)
    assert await position(app, cid, a, b) == a["id"]
    assert on_disk(root) == a["manifest"]["files"]


async def test_a_switch_whose_target_cannot_be_written_goes_back_to_the_branch_it_left(
        app: SidecarClient, data_dir: Path):
    cid, root, a, b = await two_branches(app)
    sha = a["manifest"]["files"]["d3/f7.txt"]
    (data_dir / "chats" / cid / "blobs" / sha[:2] / sha).unlink()
    with pytest.raises(RemoteError):
        await app.request("chats/switchBranch", {"chatId": cid, "messageId": a["id"]})
    assert await position(app, cid, a, b) == b["id"]
    assert on_disk(root) == b["manifest"]["files"]
    # The chat works on: a new message on b, and b's files once more after an edit.
    (root / "new.txt").write_text("after")
    await app.request("chats/addMessage", {"chatId": cid, "role": "user", "content": "more"})
    assert on_disk(root) == {**b["manifest"]["files"], "new.txt": hashlib.sha256(b"after").hexdigest()}

"""A branch switch killed part way (SIGKILL, no code of the sidecar runs): the restart finishes it
(or leaves the chat where it was) and never saves the half-switched folder as an edit of the branch
being left. Issue 18 item 5: before, 10 of 10 kills at 15-85 % of a 1,500-file switch did."""

from __future__ import annotations

import hashlib
import os
import random
import sqlite3
import time
from pathlib import Path

import anyio
import pytest

from sidecar.client import SidecarClient
from tests.timing import scaled

pytestmark = pytest.mark.anyio

FILES = 1500
TRIALS = 5


def plant(root: Path, branch: str) -> None:
    """1,500 files in 30 folders; the two branches share half the names with other bytes, so the
    switch removes, replaces and creates files."""
    offset = 0 if branch == "a" else FILES // 2
    for i in range(offset, offset + FILES):
        path = root / f"d{i % 30}" / f"f{i}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(f"{branch}{i}\n".encode() * 200)


def on_disk(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in root.rglob("*") if p.is_file() or p.is_symlink()}


async def manifest_of(c: SidecarClient, chat_id: str, message_id: str) -> dict:
    return (await c.request("workspace/manifest", {"chatId": chat_id, "messageId": message_id}))["manifest"]


async def timed_switch(c: SidecarClient, chat_id: str, message_id: str) -> float:
    start = time.perf_counter()
    await c.request("chats/switchBranch", {"chatId": chat_id, "messageId": message_id})
    return time.perf_counter() - start


async def test_a_switch_killed_part_way_never_rewrites_the_branch_it_left(data_dir: Path):
    seed = int.from_bytes(os.urandom(4))
    rng = random.Random(seed)
    async with SidecarClient.spawn(data_dir) as c:
        chat = (await c.request("chats/create", {"title": "crash"}))["chat"]
        cid, root = chat["id"], Path(chat["workspacePath"])
        q = (await c.request("chats/addMessage", {"chatId": cid, "role": "user", "content": "q"}))["message"]
        a = (await c.request("chats/addMessage", {"chatId": cid, "role": "assistant", "content": "a"}))["message"]
        plant(root, "a")
        await c.request("workspace/files", {"chatId": cid})  # saved as branch a's files
        b = (await c.request("chats/addMessage", {"chatId": cid, "role": "assistant", "content": "b",
                                                  "parentId": q["id"]}))["message"]
        plant(root, "b")
        await c.request("workspace/files", {"chatId": cid})
        manifests = {a["id"]: await manifest_of(c, cid, a["id"]), b["id"]: await manifest_of(c, cid, b["id"])}
        assert len(set(manifests[a["id"]]["files"]) ^ set(manifests[b["id"]]["files"])) == FILES
        # How long a whole switch takes here, to kill at a point inside one.
        duration = min([await timed_switch(c, cid, a["id"]), await timed_switch(c, cid, b["id"])])
        await c.request("shutdown")

    other = {a["id"]: b["id"], b["id"]: a["id"]}
    here = b["id"]
    for trial in range(TRIALS):
        fraction = rng.uniform(0.15, 0.85)
        where = f"trial {trial}, seed {seed}, killed at {fraction:.0%} of {duration * 1000:.0f} ms"
        async with SidecarClient.spawn(data_dir) as c:
            await c.request("workspace/files", {"chatId": cid})  # the chat open, its folder in sync
            await c.send({"jsonrpc": "2.0", "id": "switch", "method": "chats/switchBranch",
                          "params": {"chatId": cid, "messageId": other[here]}})
            await anyio.sleep(duration * fraction)
            c.proc.kill()
            await c.proc.wait()

        async with SidecarClient.spawn(data_dir) as c:
            await c.request("workspace/files", {"chatId": cid})
            leaf = (await c.request("chats/get", {"id": cid}))["chat"].get("activeLeafId")
            assert leaf in manifests, where
            for message_id, manifest in manifests.items():  # neither branch got an "edit"
                assert (await manifest_of(c, cid, message_id))["id"] == manifest["id"], where
            assert on_disk(root) == manifests[leaf]["files"], where
            here = leaf
            await c.request("shutdown")


def switch_recorded(data_dir: Path) -> bool:
    """Whether the database holds a begun switch (read as the next start would find it)."""
    conn = sqlite3.connect(data_dir / "sidecar.db")
    try:
        return conn.execute("SELECT count(*) FROM workspace_switches").fetchone()[0] > 0
    finally:
        conn.close()


async def test_a_restart_finishes_a_cut_off_switch_without_waiting_for_a_request(data_dir: Path):
    async with SidecarClient.spawn(data_dir) as c:
        chat = (await c.request("chats/create", {"title": "crash"}))["chat"]
        cid, root = chat["id"], Path(chat["workspacePath"])
        q = (await c.request("chats/addMessage", {"chatId": cid, "role": "user", "content": "q"}))["message"]
        a = (await c.request("chats/addMessage", {"chatId": cid, "role": "assistant", "content": "a"}))["message"]
        plant(root, "a")
        await c.request("workspace/files", {"chatId": cid})
        b = (await c.request("chats/addMessage", {"chatId": cid, "role": "assistant", "content": "b",
                                                  "parentId": q["id"]}))["message"]
        plant(root, "b")
        await c.request("workspace/files", {"chatId": cid})
        files_a = (await manifest_of(c, cid, a["id"]))["files"]
        duration = await timed_switch(c, cid, a["id"])
        await timed_switch(c, cid, b["id"])
        await c.request("shutdown")
    for attempt in range(10):  # until a kill lands after the switch was recorded
        async with SidecarClient.spawn(data_dir) as c:
            await c.request("workspace/files", {"chatId": cid})
            await c.send({"jsonrpc": "2.0", "id": "switch", "method": "chats/switchBranch",
                          "params": {"chatId": cid, "messageId": a["id"]}})
            await anyio.sleep(duration * (0.3 + attempt * 0.05))
            c.proc.kill()
            await c.proc.wait()
        if switch_recorded(data_dir):
            break
    else:
        pytest.skip("no kill landed inside the switch on this machine")
    async with SidecarClient.spawn(data_dir) as c:
        # No request touches the chat's files: the start-up finishes the switch by itself.
        with anyio.fail_after(scaled(20)):
            while (await c.request("chats/get", {"id": cid}))["chat"].get("activeLeafId") != a["id"]:
                await anyio.sleep(0.05)
        assert on_disk(root) == files_a
        assert not switch_recorded(data_dir)
        await c.request("shutdown")

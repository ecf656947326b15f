"""Snapshots against a hostile folder, through the real process (issue 18, items 3 and 4): a name that
is not valid UTF-8, and a path flipped between file, folder and link while requests run."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sidecar.client import SidecarClient
from tests.workspace.test_scan_races import FLIPPER, SECRET

pytestmark = pytest.mark.anyio


async def new_chat(c: SidecarClient) -> dict[str, Any]:
    return (await c.request("chats/create", {"title": "t"}))["chat"]


async def files(c: SidecarClient, chat_id: str) -> dict[str, str]:
    listed = (await c.request("workspace/files", {"chatId": chat_id}))["files"]
    return {f["path"]: f["sha256"] for f in listed}


def unversioned_notes(c: SidecarClient) -> list[list[str]]:
    return [n["params"]["unversioned"] for n in c.notifications
            if n["method"] == "workspace/changed" and n["params"].get("unversioned")]


async def test_a_name_that_is_not_utf8_breaks_no_request_and_is_named_once(sidecar: SidecarClient):
    chat = await new_chat(sidecar)
    cid = chat["id"]
    q = (await sidecar.request("chats/addMessage", {"chatId": cid, "role": "user", "content": "q"}))["message"]
    await sidecar.request("workspace/writeFile", {"chatId": cid, "path": "a.txt", "text": "a"})
    root = os.fsencode(chat["workspacePath"])
    with open(os.path.join(root, b"caf\xe9.txt"), "wb") as f:  # as a Latin-1 tool would name it
        f.write(b"kept as it is")
    os.mkdir(os.path.join(root, b"dir\xff"))
    with open(os.path.join(root, b"dir\xff", b"in.txt"), "wb") as f:
        f.write(b"under a bad folder name")

    assert list(await files(sidecar, cid)) == ["a.txt"]
    await sidecar.request("workspace/writeFile", {"chatId": cid, "path": "b.txt", "text": "b"})
    call = (await sidecar.request("tools/call", {"toolId": "write_file", "chatId": cid,
                                                 "args": {"path": "c.txt", "content": "c"}}))["toolCall"]
    assert call["status"] == "success", call
    listed = (await sidecar.request("tools/call", {"toolId": "list_files", "chatId": cid, "args": {}}))["toolCall"]
    assert listed["status"] == "success", listed
    assert "`caf\\xe9.txt`, `dir\\xff`" in listed["result"]["listing"]
    assert sorted(await files(sidecar, cid)) == ["a.txt", "b.txt", "c.txt"]
    await sidecar.wait_for(lambda: unversioned_notes(sidecar))
    assert unversioned_notes(sidecar) == [["caf\\xe9.txt", "dir\\xff"]]  # each named once

    # Outside edits are still saved and announced after the watcher met the names (a folder with
    # such a name keeps failing a fresh watcher: then they are picked up when it is retried).
    Path(chat["workspacePath"], "d.txt").write_text("from an editor")
    await sidecar.wait_notification("workspace/changed", lambda p: "d.txt" in p["changed"]["added"], timeout=30)

    # A branch without any of the files, and back: the unversioned entries are never touched.
    b = (await sidecar.request("chats/addMessage", {"chatId": cid, "role": "assistant", "content": "b"}))["message"]
    other = (await sidecar.request("chats/addMessage", {"chatId": cid, "role": "assistant", "content": "o",
                                                        "parentId": q["id"]}))["message"]
    await sidecar.request("chats/switchBranch", {"chatId": cid, "messageId": other["id"]})
    await sidecar.request("chats/switchBranch", {"chatId": cid, "messageId": b["id"]})
    with open(os.path.join(root, b"caf\xe9.txt"), "rb") as f:
        assert f.read() == b"kept as it is"
    assert os.path.exists(os.path.join(root, b"dir\xff", b"in.txt"))
    assert unversioned_notes(sidecar) == [["caf\\xe9.txt", "dir\\xff"]]
    assert (await sidecar.request("ping")) == {}


async def test_requests_while_a_path_flips_never_fail(sidecar: SidecarClient, tmp_path: Path):
    chat = await new_chat(sidecar)
    cid, root = chat["id"], Path(chat["workspacePath"])
    await sidecar.request("workspace/writeFile", {"chatId": cid, "path": "fixed.txt", "text": "fixed"})
    outside_file = tmp_path / "outside.txt"
    outside_file.write_text(SECRET)
    outside_dir = tmp_path / "outside-dir"
    outside_dir.mkdir()
    (outside_dir / "inner").write_text(SECRET)
    stage = tmp_path / "stage"
    stage.mkdir()
    stop = tmp_path / "stop"
    flipper = subprocess.Popen([sys.executable, "-c", FLIPPER, str(root), str(stage), str(outside_file),
                                str(outside_dir), "2000", str(stop)], stdout=subprocess.PIPE, text=True)
    secret = hashlib.sha256(SECRET.encode()).hexdigest()
    failed: list[dict[str, Any]] = []
    done = 0
    try:
        while done < 200 or flipper.poll() is None:
            if done % 2:
                reply = await sidecar.request_raw("workspace/writeFile",
                                                  {"chatId": cid, "path": "w.txt", "text": str(done)})
            else:
                reply = await sidecar.request_raw("workspace/files", {"chatId": cid})
            if "error" in reply:
                failed.append(reply["error"])
            else:
                for f in reply["result"].get("files", []):
                    assert f["sha256"] != secret, f"{f['path']} was read through a link"
                    assert f["path"] in ("fixed.txt", "w.txt", "p", "p/inner"), f
            done += 1
            if done == 200:
                stop.touch()
    finally:
        stop.touch()
        out, _ = flipper.communicate(timeout=120)
    assert int(out) >= 2000 and done >= 200
    assert failed == []
    assert (await files(sidecar, cid))["fixed.txt"] == hashlib.sha256(b"fixed").hexdigest()

"""No write leaves the workspace, through the real process: links planted on the way of
`workspace/writeFile`, of the model's own `write_file` / `delete_file`, and of a branch switch."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from sidecar.client import SidecarClient

pytestmark = pytest.mark.anyio


async def new_chat(c: SidecarClient) -> tuple[str, Path]:
    chat = (await c.request("chats/create", {"title": "t"}))["chat"]
    root = Path(chat["workspacePath"])
    root.mkdir(parents=True, exist_ok=True)  # made on first use; links are planted before that
    return chat["id"], root


async def write(c: SidecarClient, cid: str, path: str, text: str) -> dict[str, Any]:
    return await c.request_raw("workspace/writeFile", {"chatId": cid, "path": path, "text": text})


async def tool(c: SidecarClient, cid: str, tool_id: str, args: dict[str, Any]) -> dict[str, Any]:
    return (await c.request("tools/call", {"toolId": tool_id, "args": args, "chatId": cid}))["toolCall"]


def tree(root: Path) -> dict[str, bytes | str]:
    """Every file (its bytes) and link (its target) under ``root``, links not followed."""
    out: dict[str, bytes | str] = {}
    for directory, dirs, names in os.walk(root):
        for name in dirs + names:
            path = Path(directory, name)
            rel = path.relative_to(root).as_posix()
            if path.is_symlink():
                out[rel] = f"-> {os.readlink(path)}"
            elif path.is_file():
                out[rel] = path.read_bytes()
    return out


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    (folder / "sub").mkdir(parents=True)
    (folder / "notes.md").write_text("the user's own notes")
    (folder / "sub" / "x.txt").write_text("x")
    return folder


async def test_write_file_refuses_links_anywhere_on_the_path_with_invalid_params(sidecar: SidecarClient,
                                                                                  outside: Path):
    cid, root = await new_chat(sidecar)
    (root / "deep" / "er").mkdir(parents=True)
    os.symlink(outside, root / "deep" / "er" / "out")
    os.symlink(outside / "notes.md", root / "notes.md")
    before = tree(outside)
    for path, named in (("deep/er/out/sub/x.txt", "deep/er/out"), ("notes.md", "notes.md")):
        reply = await write(sidecar, cid, path, "pwned")
        assert reply["error"]["code"] == -32602, reply
        assert reply["error"]["data"]["path"] == "params.path"
        assert f"'{named}' is a symbolic link" in reply["error"]["message"]
    assert tree(outside) == before
    assert os.readlink(root / "notes.md") == str(outside / "notes.md")  # the user's link is left as it was


async def test_the_longest_legal_name_is_written_not_an_error(sidecar: SidecarClient):
    cid, root = await new_chat(sidecar)
    name = "n" * 255
    reply = await write(sidecar, cid, f"dir/{name}", "fits")
    assert "result" in reply, reply
    assert (root / "dir" / name).read_text() == "fits"
    files = (await sidecar.request("workspace/files", {"chatId": cid}))["files"]
    assert [f["path"] for f in files] == [f"dir/{name}"]


async def test_the_models_file_tools_never_write_or_delete_through_a_link(sidecar: SidecarClient,
                                                                          outside: Path):
    cid, root = await new_chat(sidecar)
    os.symlink(outside, root / "out")
    os.symlink(outside / "notes.md", root / "notes.md")
    before = tree(outside)
    for tool_id, args in (("write_file", {"path": "out/notes.md", "content": "pwned"}),
                          ("write_file", {"path": "notes.md", "content": "pwned"}),
                          ("write_file", {"path": "out/new.txt", "content": "pwned"}),
                          ("delete_file", {"path": "out/sub"})):
        call = await tool(sidecar, cid, tool_id, args)
        assert call["status"] == "error", call
        assert "symbolic link" in call["error"] or "link" in call["error"], call
    assert tree(outside) == before
    deleted = await tool(sidecar, cid, "delete_file", {"path": "out"})
    assert deleted["status"] == "success", deleted
    assert not os.path.lexists(root / "out") and tree(outside) == before  # the link went, not its target
    made = await tool(sidecar, cid, "write_file", {"path": "out/new.txt", "content": "inside now"})
    assert made["status"] == "success" and (root / "out" / "new.txt").read_text() == "inside now"


async def test_a_branch_switch_replaces_planted_links_and_writes_nothing_outside(sidecar: SidecarClient,
                                                                                 outside: Path):
    cid, root = await new_chat(sidecar)
    assert "result" in await write(sidecar, cid, "notes.md", "shared")
    question = (await sidecar.request("chats/addMessage", {"chatId": cid, "role": "user", "content": "q"}))["message"]
    a = (await sidecar.request("chats/addMessage", {"chatId": cid, "role": "assistant", "content": "A",
                                                    "parentId": question["id"]}))["message"]
    for path, text in (("src/app/main.py", "print('A')\n"), ("src/app/util.py", "A = 1\n"), ("sub/x.txt", "A's x")):
        assert "result" in await write(sidecar, cid, path, text)
    branch_a = tree(root)
    b = (await sidecar.request("chats/addMessage", {"chatId": cid, "role": "assistant", "content": "B",
                                                    "parentId": question["id"]}))["message"]
    assert tree(root) == {"notes.md": b"shared"}
    # A tool on branch B leaves links where branch A has folders, and one A knows nothing of.
    os.symlink(outside, root / "src")
    os.symlink(outside, root / "sub")
    os.symlink(outside / "notes.md", root / "notes2.md")
    before = tree(outside)
    await sidecar.request("chats/switchBranch", {"chatId": cid, "messageId": a["id"]})
    assert tree(outside) == before
    # The links in the way were replaced by A's folders, every byte back; the other is not
    # versioned, so the switch leaves it where it is.
    planted = {"notes2.md": f"-> {outside / 'notes.md'}"}
    assert tree(root) == branch_a | planted
    await sidecar.request("chats/switchBranch", {"chatId": cid, "messageId": b["id"]})
    assert tree(outside) == before
    assert tree(root) == {"notes.md": b"shared"} | planted


async def test_a_link_at_the_spill_folder_cuts_a_big_result_and_the_turn_goes_on(sidecar: SidecarClient,
                                                                                 outside: Path):
    cid, root = await new_chat(sidecar)
    (root / "big.txt").write_text("x" * 40_000)
    os.symlink(outside, root / ".tool-results")  # where results too big for the context go
    before = tree(outside)
    line = '/tool read_file {"path": "big.txt"}'
    turn = await sidecar.request("chat/send", {"chatId": cid, "content": line})
    assert turn["stopReason"] == "endTurn", turn
    assert tree(outside) == before
    assert os.path.islink(root / ".tool-results")

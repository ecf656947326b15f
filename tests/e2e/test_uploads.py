"""workspace/upload against the real process, as an attacker and an impatient user would try it:
special files, sizes past the limit, destinations through links, reserved and overlong names, and a
long upload that reports progress, leaves the chat free and stops when cancelled."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from sidecar.client import SidecarClient
from sidecar.workspace.blobs import BlobStore

from .test_workspace import disk, expect_error, new_chat

pytestmark = pytest.mark.anyio


async def files_of(c: SidecarClient, chat_id: str) -> list[str]:
    return [f["path"] for f in (await c.request("workspace/files", {"chatId": chat_id}))["files"]]


async def test_special_files_are_refused_and_nothing_hangs(sidecar: SidecarClient, data_dir: Path, tmp_path: Path):
    cid = (await new_chat(sidecar))["id"]
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "ok.txt").write_text("ok")
    os.mkfifo(folder / "inner-pipe")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(tmp_path / "sock"))
    try:
        for source, said in [("/proc/self/environ", "kernel pseudo file system"), ("/dev/zero", "character device"),
                             (str(fifo), "FIFO"), (str(tmp_path / "sock"), "socket"), (str(folder), "FIFO"),
                             ("/sys/kernel", "kernel pseudo file system"), ("/proc/self", "kernel pseudo file system")]:
            error = await expect_error(sidecar, -32602, "workspace/upload", {"chatId": cid, "paths": [source]})
            assert error["data"]["path"] == "params.paths[0]" and said in error["message"], (source, error)
    finally:
        sock.close()
    assert await files_of(sidecar, cid) == []
    assert BlobStore(data_dir / "chats" / cid / "blobs").all_shas() == []  # not even copied aside
    assert await sidecar.request("ping") == {}


async def test_an_upload_over_the_limit_is_refused_and_one_at_it_is_copied(data_dir: Path, tmp_path: Path):
    big, fits = tmp_path / "big.bin", tmp_path / "fits.bin"
    big.write_bytes(os.urandom(1001))
    fits.write_bytes(os.urandom(1000))
    async with SidecarClient.spawn(data_dir, args=("--max-upload-bytes", "1000")) as c:
        cid = (await new_chat(c))["id"]
        error = await expect_error(c, -32602, "workspace/upload", {"chatId": cid, "paths": [str(big)]})
        assert "over the limit of 1000 bytes" in error["message"] and "--max-upload-bytes" in error["message"]
        error = await expect_error(c, -32602, "workspace/upload", {"chatId": cid, "paths": [str(fits), str(big)]})
        assert await files_of(c, cid) == []  # all or nothing
        got = await c.request("workspace/upload", {"chatId": cid, "paths": [str(fits)]})
        assert got["added"] == ["fits.bin"]
        assert (data_dir / "chats" / cid / "workspace" / "fits.bin").read_bytes() == fits.read_bytes()
        assert list((data_dir / "chats" / cid / "uploads").iterdir()) == []  # staged, renamed in, gone


async def test_a_destination_through_a_link_or_a_file_is_refused(sidecar: SidecarClient, data_dir: Path,
                                                               tmp_path: Path):
    cid = (await new_chat(sidecar))["id"]
    root = data_dir / "chats" / cid / "workspace"
    outside = tmp_path / "outside"
    (outside / "sub").mkdir(parents=True)
    root.mkdir(parents=True, exist_ok=True)
    os.symlink(outside, root / "out")
    src = tmp_path / "src"
    (src / "pics").mkdir(parents=True)
    (src / "pics" / "p.png").write_bytes(b"png")
    (src / "doc.txt").write_text("doc")
    for dest in ["out", "out/sub", "out/new/deeper"]:
        error = await expect_error(sidecar, -32602, "workspace/upload",
                                   {"chatId": cid, "paths": [str(src / "doc.txt")], "dest": dest})
        assert error["data"]["path"] == "params.dest"
        assert "'out' in the workspace is a symbolic link" in error["message"]
    # A link inside the destination, where an uploaded folder goes, is refused the same way.
    (root / "in").mkdir()
    os.symlink(outside, root / "in" / "pics")
    error = await expect_error(sidecar, -32602, "workspace/upload",
                               {"chatId": cid, "paths": [str(src / "pics")], "dest": "in"})
    assert "'in/pics' in the workspace is a symbolic link" in error["message"]
    await sidecar.request("workspace/writeFile", {"chatId": cid, "path": "notes", "text": "a file"})
    error = await expect_error(sidecar, -32602, "workspace/upload",
                               {"chatId": cid, "paths": [str(src / "doc.txt")], "dest": "notes/x"})
    assert "'notes' in the workspace is a file" in error["message"]
    assert disk(outside) == {}
    assert await files_of(sidecar, cid) == ["notes"]


async def test_reserved_and_overlong_names_are_refused_with_the_rule(sidecar: SidecarClient, tmp_path: Path):
    cid = (await new_chat(sidecar))["id"]
    for path, said in [("x.sidecar-tmp", "temporary files"), (".sidecar-sync-123", "sync markers"),
                       ("d/.notes.md.sidecar-tmp", "temporary files"), ("n" * 256, "limit of 255 bytes"),
                       ("/".join(["d" * 250] * 17), "limit of 4096 bytes")]:
        error = await expect_error(sidecar, -32602, "workspace/writeFile", {"chatId": cid, "path": path, "text": "x"})
        assert error["data"]["path"] == "params.path" and said in error["message"], (path, error)
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "keep.sidecar-tmp").write_text("mine")
    error = await expect_error(sidecar, -32602, "workspace/upload", {"chatId": cid, "paths": [str(folder)]})
    assert error["data"]["path"] == "params.paths[0]" and "temporary files" in error["message"]
    error = await expect_error(sidecar, -32602, "workspace/upload",
                               {"chatId": cid, "paths": [str(tmp_path)], "dest": ".sidecar-sync-1"})
    assert error["data"]["path"] == "params.dest"
    odd = tmp_path / "odd"
    odd.mkdir()
    (odd / os.fsdecode(b"bad-\xff-name.txt")).write_text("x")
    error = await expect_error(sidecar, -32602, "workspace/upload", {"chatId": cid, "paths": [str(odd)]})
    assert "not valid UTF-8" in error["message"]
    assert await files_of(sidecar, cid) == []


async def test_a_long_upload_reports_progress_leaves_the_chat_free_and_stops_when_cancelled(
        data_dir: Path, tmp_path: Path):
    huge = tmp_path / "huge.img"
    with huge.open("wb") as f:
        f.truncate(64 << 30)  # sparse: reading it is fast, copying it all would take minutes
    async with SidecarClient.spawn(data_dir, args=("--max-upload-bytes", str(128 << 30))) as c:
        cid = (await new_chat(c))["id"]
        chat_dir = data_dir / "chats" / cid
        request_id = c.new_id()
        answer = c.expect(request_id)
        await c.send({"jsonrpc": "2.0", "id": request_id, "method": "workspace/upload",
                      "params": {"chatId": cid, "paths": [str(huge)], "workDoneToken": "up-1"}})

        def progress(kind: str):
            return lambda p: p["token"] == "up-1" and p["value"]["kind"] == kind

        await c.wait_notification("$/progress", progress("begin"))
        report = await c.wait_notification("$/progress", progress("report"))
        assert report["params"]["value"]["message"].endswith(f"of {64 << 30} bytes")
        # The chat is not locked by the copy: a write and a listing on it are answered meanwhile.
        await c.request("workspace/writeFile", {"chatId": cid, "path": "meanwhile.txt", "text": "hi"})
        assert await files_of(c, cid) == ["meanwhile.txt"]
        assert request_id in c._waiting  # pyright: ignore[reportPrivateUsage] (the upload is still copying)
        await c.notify("$/cancelRequest", {"id": request_id})
        reply = await answer(10)
        assert reply["error"]["code"] == -32800
        await c.wait_notification("$/progress", progress("end"))
        # The copy stops within a chunk: its half-written blob goes, nothing reaches the workspace.
        await c.wait_for(lambda: not any((chat_dir / "blobs" / "tmp").iterdir())
                         and not any((chat_dir / "uploads").iterdir()))
        assert await files_of(c, cid) == ["meanwhile.txt"]
        assert disk(chat_dir / "workspace") == {"meanwhile.txt": b"hi"}
        reports = [n for n in c.notifications if n.get("method") == "$/progress" and progress("report")(n["params"])]
        copied = max(int(n["params"]["value"]["message"].split()[1]) for n in reports)
        assert copied < (64 << 30)

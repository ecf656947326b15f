"""workspace/upload's copy over real files: what it refuses before and while copying, and what
gc keeps while an upload is under way. (The whole request, progress and cancel: tests/e2e/test_uploads.py.)"""

from __future__ import annotations

import os
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from sidecar.errors import InvalidParams
from sidecar.store import Database
from sidecar.store.chats import ChatRow
from sidecar.workspace.blobs import BlobStore
from sidecar.workspace.service import WorkspaceService
from sidecar.workspace.uploads import UploadCopy, place

pytestmark = pytest.mark.anyio


@pytest.fixture
async def ws(tmp_path: Path) -> AsyncIterator[WorkspaceService]:
    db = await Database.open(tmp_path / "data" / "sidecar.db")
    service = WorkspaceService(db, tmp_path / "data", watch=False, max_upload_bytes=1 << 20)
    yield service
    await service.aclose()
    await db.close()


@pytest.fixture
async def chat(ws: WorkspaceService) -> ChatRow:
    return await ws.chats.create("uploads")


def test_a_file_that_grows_past_the_limit_is_stopped_while_it_is_copied(tmp_path: Path):
    log = tmp_path / "app.log"
    log.write_bytes(b"x" * 1000)
    blobs = BlobStore(tmp_path / "blobs")
    copy = UploadCopy([str(log)], "", blobs, tmp_path / "uploads", limit=1 << 20)
    planned = copy.plan()
    assert copy.total == 1000
    with log.open("ab") as f:  # it grows after it was looked at, as a log being written does
        f.write(b"y" * (3 << 20))
    with pytest.raises(InvalidParams, match="grew past the limit of 1048576 bytes"):
        copy.run(planned)
    assert copy.done <= (2 << 20)  # stopped within a chunk of the limit, not at the end of the file
    assert os.listdir(tmp_path / "blobs" / "tmp") == []  # the half-copied blob is gone
    assert os.listdir(tmp_path / "uploads") == []  # and so is its staging folder
    assert blobs.all_shas() == []


def test_a_file_swapped_for_a_fifo_after_the_look_is_refused_without_blocking(tmp_path: Path):
    src = tmp_path / "data.csv"
    src.write_text("a,b\n")
    copy = UploadCopy([str(src)], "in", BlobStore(tmp_path / "blobs"), tmp_path / "uploads", limit=1 << 20)
    planned = copy.plan()
    src.unlink()
    os.mkfifo(src)  # nobody ever writes to it: opening it for reading without O_NONBLOCK would hang
    with pytest.raises(InvalidParams, match="FIFO"):
        copy.run(planned)
    src.unlink()
    os.symlink("/etc/hostname", src)
    again = UploadCopy([str(src)], "in", BlobStore(tmp_path / "blobs"), tmp_path / "uploads", limit=1 << 20)
    with pytest.raises(InvalidParams, match="replaced by a symbolic link"):
        again.run(planned)


@pytest.mark.parametrize("make", ["fifo", "socket", "device", "proc"])
async def test_special_files_in_an_uploaded_folder_are_refused_by_name(ws: WorkspaceService, chat: ChatRow,
                                                                       tmp_path: Path, make: str):
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "ok.txt").write_text("ok")
    special = folder / "special"
    held = None
    if make == "fifo":
        os.mkfifo(special)
    elif make == "socket":
        held = socket.socket(socket.AF_UNIX)
        held.bind(str(special))
    elif make == "device":
        os.symlink("/dev/zero", folder / "link-to-zero")  # a link inside a folder is skipped, not followed
        special = Path("/dev/zero")
    try:
        sources = [str(folder)] if make in ("fifo", "socket") else [str(folder), str(special)]
        if make == "proc":
            sources = [str(folder), "/proc/self/environ"]
        with pytest.raises(InvalidParams) as raised:
            await ws.upload(chat.id, sources, "")
        assert raised.value.path.startswith("params.paths[")
        assert {"fifo": "FIFO", "socket": "socket", "device": "character device",
                "proc": "kernel pseudo file system"}[make] in raised.value.reason
    finally:
        if held is not None:
            held.close()
    _, files = await ws.list_files(chat.id, None)
    assert files == []


async def test_gc_during_an_upload_keeps_what_it_copied(ws: WorkspaceService, chat: ChatRow, tmp_path: Path):
    src = tmp_path / "a.txt"
    src.write_text("uploaded")
    copy = UploadCopy([str(src)], "", ws._workspace(chat.id).blobs,  # pyright: ignore[reportPrivateUsage] (its store)
                      tmp_path / "uploads", limit=1 << 20)
    staged = copy.run()
    ws._uploads[chat.id] = {copy}  # pyright: ignore[reportPrivateUsage] (as upload holds it until committed)
    assert (await ws.gc(chat.id))[0] == 0
    ws._uploads.clear()  # pyright: ignore[reportPrivateUsage] (the upload was abandoned)
    assert (await ws.gc(chat.id))[0] == 1
    assert staged["a.txt"].sha256 == copy.shas.pop()


def test_placing_never_follows_a_link_swapped_in_after_the_checks(tmp_path: Path):
    """The checks under the lock say the way is clear; a tool (not bound by the lock) then swaps a
    folder for a link. The rename goes through folders opened without following links: refused."""
    src = tmp_path / "doc.txt"
    src.write_text("doc")
    copy = UploadCopy([str(src)], "in/deep", BlobStore(tmp_path / "blobs"), tmp_path / "uploads", limit=1 << 20)
    staged = copy.run()
    root, outside = tmp_path / "ws", tmp_path / "outside"
    (root / "in").mkdir(parents=True)
    (outside / "deep").mkdir(parents=True)
    os.rmdir(root / "in")
    os.symlink(outside, root / "in")
    assert copy.staging is not None
    with pytest.raises(InvalidParams, match="'in' in the workspace is a symbolic link"):
        place(root, copy.staging, staged)
    assert list((outside / "deep").iterdir()) == []
    os.unlink(root / "in")
    placed = place(root, copy.staging, staged)
    assert [(rel, sha) for rel, _, sha in placed] == [("in/deep/doc.txt", staged["in/deep/doc.txt"].sha256)]
    assert (root / "in" / "deep" / "doc.txt").read_text() == "doc"

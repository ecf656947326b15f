"""The workspace service over a real database and real folders: versions, the file API, outside
edits while the service runs, and a lost folder rebuilt from its versions."""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from sidecar.errors import InvalidParams, NotFound
from sidecar.store import Database
from sidecar.store.chats import ChatRow
from sidecar.workspace.blobs import BlobStore
from sidecar.workspace.outside_edits import Changes
from sidecar.workspace.service import MAX_READ_LIMIT, WorkspaceService, encode_content
from tests.timing import scaled

pytestmark = pytest.mark.anyio


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    database = await Database.open(tmp_path / "data" / "sidecar.db")
    yield database
    await database.close()


@pytest.fixture
async def ws(db: Database, tmp_path: Path) -> AsyncIterator[WorkspaceService]:
    service = WorkspaceService(db, tmp_path / "data", watch=False)
    yield service
    await service.aclose()


@pytest.fixture
async def chat(ws: WorkspaceService) -> ChatRow:
    return await ws.chats.create("files")


async def test_each_write_is_a_version_and_old_versions_stay_readable(ws: WorkspaceService, chat: ChatRow):
    first = await ws.write_file(chat.id, "notes/a.txt", b"one")
    second = await ws.write_file(chat.id, "notes/a.txt", b"two")
    third = await ws.write_file(chat.id, "b.bin", b"\x00\xff")
    assert len({first, second, third}) == 3
    assert (ws.workspace_path(chat.id) / "notes/a.txt").read_bytes() == b"two"
    assert (await ws.read_file(chat.id, "notes/a.txt", first)).data == b"one"
    now = await ws.read_file(chat.id, "notes/a.txt", None)
    assert (now.data, now.size) == (b"two", 3)
    manifest_id, listed = await ws.list_files(chat.id, None)
    assert manifest_id == third and [(f.path, f.size) for f in listed] == [("b.bin", 2), ("notes/a.txt", 3)]
    assert await ws.diff(chat.id, first, third) == (["b.bin"], [], ["notes/a.txt"])
    m = await ws.get_manifest(chat.id, third)
    assert m.source == "edit" and m.parent_id == second
    assert (await ws.require_chat(chat.id)).active_manifest_id == third


async def test_reads_say_what_is_wrong(ws: WorkspaceService, chat: ChatRow):
    await ws.write_file(chat.id, "dir/big.txt", b"x" * 100)
    with pytest.raises(InvalidParams, match="directory"):
        await ws.read_file(chat.id, "dir", None)
    with pytest.raises(NotFound):
        await ws.read_file(chat.id, "nope.txt", None)
    with pytest.raises(InvalidParams, match="over the read limit of 10"):
        await ws.read_file(chat.id, "dir/big.txt", None, max_bytes=10)
    for limit in (0, MAX_READ_LIMIT + 1):
        with pytest.raises(InvalidParams, match="between 1 and"):
            await ws.read_file(chat.id, "dir/big.txt", None, max_bytes=limit)
    with pytest.raises(InvalidParams):
        await ws.read_file(chat.id, "../escape", None)
    with pytest.raises(NotFound):
        await ws.get_manifest(chat.id, "no-such-manifest")
    with pytest.raises(NotFound):
        await ws.read_file("no-such-chat", "a.txt", None)


async def test_a_write_never_goes_through_a_link_or_over_a_folder(ws: WorkspaceService, chat: ChatRow,
                                                                  tmp_path: Path):
    await ws.write_file(chat.id, "folder/x.txt", b"x")
    with pytest.raises(InvalidParams, match="directory"):
        await ws.write_file(chat.id, "folder", b"over a folder")
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, ws.workspace_path(chat.id) / "link")
    with pytest.raises(InvalidParams):
        await ws.write_file(chat.id, "link/file.txt", b"escape")
    assert list(outside.iterdir()) == []


async def test_a_link_planted_at_the_temporary_name_is_not_written_through(ws: WorkspaceService, chat: ChatRow,
                                                                            tmp_path: Path):
    outside = tmp_path / "bashrc"
    outside.write_text("keep me")
    folder = ws.workspace_path(chat.id)
    await ws.write_file(chat.id, "foo", b"one")
    os.symlink(outside, folder / ".foo.sidecar-tmp")
    os.symlink(outside, folder / ".new.sidecar-tmp")
    await ws.write_file(chat.id, "foo", b"two")  # replaces an existing file
    await ws.write_file(chat.id, "new", b"new")  # makes a new one
    assert outside.read_text() == "keep me"
    assert (folder / "foo").read_bytes() == b"two" and not (folder / "foo").is_symlink()
    assert (folder / "new").read_bytes() == b"new"


async def test_materialise_never_writes_through_a_link_at_the_temporary_name(ws: WorkspaceService, chat: ChatRow,
                                                                             tmp_path: Path):
    outside = tmp_path / "bashrc"
    outside.write_text("keep me")
    folder = ws.workspace_path(chat.id)
    first = await ws.write_file(chat.id, "a.txt", b"first")
    await ws.write_file(chat.id, "a.txt", b"second")
    os.symlink(outside, folder / ".a.txt.sidecar-tmp")
    async with ws.locked(chat.id) as (current, _):
        await ws.materialize(current, first)
    assert outside.read_text() == "keep me"
    assert (folder / "a.txt").read_bytes() == b"first"


async def test_upload_refuses_the_root_and_folders_holding_the_data(ws: WorkspaceService, chat: ChatRow,
                                                                     tmp_path: Path):
    await ws.write_file(chat.id, "a.txt", b"a")
    for source in ["/", str(tmp_path / "data"), str(tmp_path), str(ws.chat_dir(chat.id)),
                   str(ws.root), str(tmp_path / "data" / ".."), str(ws.workspace_path(chat.id))]:
        with pytest.raises(InvalidParams, match="params.paths"):
            await ws.upload(chat.id, [source], "")
    (ws.workspace_path(chat.id) / "sub").mkdir()
    with pytest.raises(InvalidParams, match="into itself"):
        await ws.upload(chat.id, [str(ws.workspace_path(chat.id) / "sub")], "sub/deeper")
    _, files = await ws.list_files(chat.id, None)
    assert [f.path for f in files] == ["a.txt"]


async def test_upload_copies_files_and_folders_in_without_their_links(ws: WorkspaceService, chat: ChatRow,
                                                                      tmp_path: Path):
    src = tmp_path / "src"
    (src / "pics").mkdir(parents=True)
    (src / "pics" / "p.png").write_bytes(b"png")
    os.symlink("/etc/passwd", src / "pics" / "link")
    (src / "doc.txt").write_text("doc")
    await ws.write_file(chat.id, "in/doc.txt", b"old doc")
    uploaded = await ws.upload(chat.id, [str(src / "pics"), str(src / "doc.txt")], "in")
    assert uploaded is not None
    manifest, added, modified = uploaded
    assert (added, modified) == (["in/pics/p.png"], ["in/doc.txt"])
    assert manifest.source == "user_upload"
    assert await ws.upload(chat.id, [str(src / "doc.txt")], "in") is None  # nothing changed
    with pytest.raises(InvalidParams, match="absolute"):
        await ws.upload(chat.id, ["relative.txt"], "")
    with pytest.raises(InvalidParams, match="does not exist"):
        await ws.upload(chat.id, [str(tmp_path / "missing")], "")


async def test_gc_keeps_every_versions_blobs_and_drops_the_rest(ws: WorkspaceService, chat: ChatRow):
    old = await ws.write_file(chat.id, "a.txt", b"version one")
    await ws.write_file(chat.id, "a.txt", b"version two")
    BlobStore(ws.chat_dir(chat.id) / "blobs").put_bytes(b"referenced by nothing")
    removed, freed = await ws.gc(chat.id)
    assert (removed, freed) == (1, len(b"referenced by nothing"))
    assert (await ws.read_file(chat.id, "a.txt", old)).data == b"version one"
    assert await ws.gc(chat.id) == (0, 0)


async def test_switching_versions_touches_only_the_folder_and_unknown_ones_are_refused(ws: WorkspaceService,
                                                                                        chat: ChatRow):
    first = await ws.write_file(chat.id, "a.txt", b"a")
    await ws.write_file(chat.id, "b.txt", b"b")
    async with ws.locked(chat.id) as (current, _):
        assert await ws.materialize(current, first) == {"a.txt": (await ws.get_manifest(chat.id, first)).files["a.txt"]}
        with pytest.raises(NotFound):
            await ws.materialize(current, "no-such-manifest")
    assert sorted(os.listdir(ws.workspace_path(chat.id))) == ["a.txt"]


async def test_a_lost_folder_is_rebuilt_from_its_active_version(db: Database, tmp_path: Path):
    first = WorkspaceService(db, tmp_path / "data", watch=False)
    chat = await first.chats.create("lost")
    await first.write_file(chat.id, "deep/f.txt", b"kept in the blobs")
    await first.aclose()
    shutil.rmtree(first.workspace_path(chat.id))
    again = WorkspaceService(db, tmp_path / "data", watch=False)
    try:
        _, files = await again.manifest_files(chat.id, None)
        assert list(files) == ["deep/f.txt"]
        assert (again.workspace_path(chat.id) / "deep/f.txt").read_bytes() == b"kept in the blobs"
    finally:
        await again.aclose()


async def test_outside_edits_become_a_version_and_stop_with_the_chat(db: Database, tmp_path: Path):
    heard: list[tuple[str, str, Changes]] = []
    announced = anyio.Event()

    async def on_change(chat_id: str, manifest_id: str, changes: Changes) -> None:
        heard.append((chat_id, manifest_id, changes))
        announced.set()

    ws = WorkspaceService(db, tmp_path / "data", on_change=on_change)
    async with anyio.create_task_group() as tg:
        ws.bind(tg)
        chat = await ws.chats.create("watched")
        first = await ws.write_file(chat.id, "a.txt", b"ours")  # takes the lock: the folder is watched
        (ws.workspace_path(chat.id) / "a.txt").write_bytes(b"edited outside")
        with anyio.fail_after(scaled(10)):
            await announced.wait()
        [(chat_id, manifest_id, changes)] = heard
        assert chat_id == chat.id and manifest_id != first and changes == ([], [], ["a.txt"])
        assert (await ws.get_manifest(chat.id, manifest_id)).source == "edit"
        async with ws.locked(chat.id):
            await ws.chats.delete(chat.id)
            await ws.forget(chat.id)
        assert not ws.chat_dir(chat.id).exists()
        await ws.aclose()


def test_content_is_text_when_it_can_be():
    assert encode_content("héllo".encode()) == ("héllo", None)
    assert encode_content(b"a\x00b") == (None, "YQBi")
    assert encode_content(b"\xff") == (None, "/w==")

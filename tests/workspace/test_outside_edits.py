"""Outside edits under a real watcher: a burst becomes one saved version, announced once; a chat
no longer watched (or deleted, or beyond the most recently used) is not followed; a failed save
does not stop the follower."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest

from sidecar.errors import NotFound
from sidecar.workspace.blobs import BlobStore
from sidecar.workspace.outside_edits import EDIT_DEBOUNCE, MAX_WATCHED, Changes, OutsideEdits
from sidecar.workspace.tree import Tree
from sidecar.workspace.watcher import Journal
from tests.timing import scaled

pytestmark = pytest.mark.anyio


@dataclass
class Folder:
    chat_id: str
    tree: Tree
    journal: Journal | None = None


class Recorder:
    """Stands where the versioning core saves edits, and where the UI hears of them."""

    def __init__(self, failures: list[Exception] | None = None) -> None:
        self.failures = failures or []  # raised by the first saves, in order
        self.saves: list[str] = []
        self.heard: list[tuple[str, str]] = []
        self.announced = anyio.Event()
        self.tried = anyio.Event()

    async def save(self, chat_id: str) -> tuple[str, Changes] | None:
        self.saves.append(chat_id)
        self.tried.set()
        if self.failures:
            raise self.failures.pop(0)
        return f"m{len(self.saves)}", ([], [], [])

    async def on_change(self, chat_id: str, manifest_id: str, changes: Changes) -> None:
        self.heard.append((chat_id, manifest_id))
        self.announced.set()


def folder(tmp_path: Path, chat_id: str) -> Folder:
    base = tmp_path / chat_id
    return Folder(chat_id, Tree(base / "workspace", BlobStore(base / "blobs"), base / "statcache"))


async def test_a_burst_of_edits_is_saved_once_it_settles(tmp_path: Path):
    record = Recorder()
    edits = OutsideEdits(record.save, record.on_change)
    ws = folder(tmp_path, "c1")
    async with anyio.create_task_group() as tg:
        edits.bind(tg)
        edits.watch(ws)
        assert ws.journal is not None  # the snapshot side reads the same journal
        for i in range(20):
            (ws.tree.root / f"f{i}.txt").write_text(str(i))
        with anyio.fail_after(scaled(10)):
            await record.announced.wait()
        await anyio.sleep(EDIT_DEBOUNCE * 3)  # nothing else happened: nothing else is saved
        assert record.saves == ["c1"] and record.heard == [("c1", "m1")]
        edits.close()
    assert ws.journal is None


async def test_an_unwatched_chat_is_not_followed(tmp_path: Path):
    record = Recorder()
    edits = OutsideEdits(record.save, record.on_change)
    ws = folder(tmp_path, "c1")
    async with anyio.create_task_group() as tg:
        edits.bind(tg)
        edits.watch(ws)
        edits.unwatch(ws)
        (ws.tree.root / "late.txt").write_text("after")
        await anyio.sleep(EDIT_DEBOUNCE * 3)
        assert record.saves == []
        tg.cancel_scope.cancel()


async def test_watching_is_off_when_disabled(tmp_path: Path):
    record = Recorder()
    edits = OutsideEdits(record.save, record.on_change, enabled=False)
    ws = folder(tmp_path, "c1")
    async with anyio.create_task_group() as tg:
        edits.bind(tg)
        edits.watch(ws)
        assert ws.journal is None
        tg.cancel_scope.cancel()


async def test_a_failed_save_is_logged_and_the_next_edits_are_still_saved(tmp_path: Path):
    record = Recorder([RuntimeError("disk full")])
    edits = OutsideEdits(record.save, record.on_change)
    ws = folder(tmp_path, "c1")
    async with anyio.create_task_group() as tg:
        edits.bind(tg)
        edits.watch(ws)
        (ws.tree.root / "first.txt").write_text("1")
        with anyio.fail_after(scaled(10)):
            await record.tried.wait()
        assert record.heard == []
        (ws.tree.root / "second.txt").write_text("2")
        with anyio.fail_after(scaled(10)):
            await record.announced.wait()
        assert record.saves == ["c1", "c1"] and record.heard == [("c1", "m2")]
        edits.close()


async def test_a_deleted_chat_is_no_longer_followed(tmp_path: Path):
    record = Recorder([NotFound("chat", "c1")])
    edits = OutsideEdits(record.save, record.on_change)
    ws = folder(tmp_path, "c1")
    async with anyio.create_task_group() as tg:
        edits.bind(tg)
        edits.watch(ws)
        (ws.tree.root / "first.txt").write_text("1")
        with anyio.fail_after(scaled(10)):
            await record.tried.wait()
        (ws.tree.root / "second.txt").write_text("2")
        await anyio.sleep(EDIT_DEBOUNCE * 3)
        assert record.saves == ["c1"]
        edits.close()


async def test_only_the_most_recently_used_chats_are_watched(tmp_path: Path):
    record = Recorder()
    edits = OutsideEdits(record.save, record.on_change)
    folders = [folder(tmp_path, f"c{i}") for i in range(MAX_WATCHED + 1)]
    async with anyio.create_task_group() as tg:
        edits.bind(tg)
        for ws in folders:
            edits.watch(ws)
            if ws is folders[1]:
                edits.watch(folders[0])  # used again: now more recent than c1
        assert folders[0].journal is not None and folders[1].journal is None
        assert all(ws.journal is not None for ws in folders[2:])
        edits.close()

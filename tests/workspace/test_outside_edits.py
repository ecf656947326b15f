"""Outside edits under a real watcher: a burst becomes one saved version, announced once; a chat
no longer watched is not followed."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest

from sidecar.workspace.blobs import BlobStore
from sidecar.workspace.outside_edits import EDIT_DEBOUNCE, Changes, OutsideEdits
from sidecar.workspace.tree import Tree
from sidecar.workspace.watcher import Journal

pytestmark = pytest.mark.anyio


@dataclass
class Folder:
    chat_id: str
    tree: Tree
    journal: Journal | None = None


class Recorder:
    """Stands where the versioning core saves edits, and where the UI hears of them."""

    def __init__(self) -> None:
        self.saves: list[str] = []
        self.heard: list[tuple[str, str]] = []
        self.announced = anyio.Event()

    async def save(self, chat_id: str) -> tuple[str, Changes] | None:
        self.saves.append(chat_id)
        return f"m{len(self.saves)}", ([], [], [])

    async def on_change(self, chat_id: str, manifest_id: str, changes: Changes) -> None:
        self.heard.append((chat_id, manifest_id))
        self.announced.set()


def folder(tmp_path: Path, chat_id: str) -> Folder:
    base = tmp_path / chat_id
    return Folder(chat_id, Tree(base / "workspace", BlobStore(base / "blobs"), base / "statcache"))


async def test_a_burst_of_edits_is_saved_once_it_settles(tmp_path: Path):
    record = Recorder()
    edits = OutsideEdits(record.save)
    ws = folder(tmp_path, "c1")
    async with anyio.create_task_group() as tg:
        edits.bind(tg, record.on_change)
        edits.watch(ws)
        assert ws.journal is not None  # the snapshot side reads the same journal
        for i in range(20):
            (ws.tree.root / f"f{i}.txt").write_text(str(i))
        with anyio.fail_after(10):
            await record.announced.wait()
        await anyio.sleep(EDIT_DEBOUNCE * 3)  # nothing else happened: nothing else is saved
        assert record.saves == ["c1"] and record.heard == [("c1", "m1")]
        edits.close()
    assert ws.journal is None


async def test_an_unwatched_chat_is_not_followed(tmp_path: Path):
    record = Recorder()
    edits = OutsideEdits(record.save)
    ws = folder(tmp_path, "c1")
    async with anyio.create_task_group() as tg:
        edits.bind(tg, record.on_change)
        edits.watch(ws)
        edits.unwatch(ws)
        (ws.tree.root / "late.txt").write_text("after")
        await anyio.sleep(EDIT_DEBOUNCE * 3)
        assert record.saves == []
        tg.cancel_scope.cancel()


async def test_watching_is_off_when_disabled(tmp_path: Path):
    record = Recorder()
    edits = OutsideEdits(record.save, enabled=False)
    ws = folder(tmp_path, "c1")
    async with anyio.create_task_group() as tg:
        edits.bind(tg, record.on_change)
        edits.watch(ws)
        assert ws.journal is None
        tg.cancel_scope.cancel()

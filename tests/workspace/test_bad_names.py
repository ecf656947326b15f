"""Names that are not valid UTF-8 (issue 18, item 3): made by a tool or an editor, they cannot be a
manifest key (JSON, SQLite text) nor travel to the UI. A snapshot leaves them out, names them
(each bad byte as \\xNN), and never touches them; the file watcher keeps working past them."""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sidecar.workspace.blobs import BlobStore
from sidecar.workspace.tree import SMALL_TREE, Tree
from sidecar.workspace.watcher import Journal


def write(root: Path, rel: str, data: str) -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(data)


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.fixture
def tree(tmp_path: Path) -> Tree:
    return Tree(tmp_path / "ws", BlobStore(tmp_path / "blobs"), tmp_path / "statcache")


@pytest.fixture
def bad_names(tree: Tree) -> Iterator[bytes]:
    root = os.fsencode(tree.root)
    os.makedirs(root, exist_ok=True)
    yield root


def test_names_that_are_not_utf8_are_left_out_and_named_and_never_touched(tree: Tree, bad_names: bytes):
    root = bad_names
    write(tree.root, "ok.txt", "ok")
    with open(os.path.join(root, b"caf\xe9.txt"), "wb") as f:
        f.write(b"latin-1 name")
    os.mkdir(os.path.join(root, b"dir\xff"))
    with open(os.path.join(root, b"dir\xff", b"in.txt"), "wb") as f:
        f.write(b"under a bad folder name")
    result = tree.scan()
    assert result.files == {"ok.txt": sha("ok")}
    assert sorted(result.unversioned) == ["caf\\xe9.txt", "dir\\xff"]
    # Switching to a version without ok.txt and back leaves the unversioned entries as they were.
    tree.materialize(result.files, {})
    tree.materialize({}, result.files)
    with open(os.path.join(root, b"caf\xe9.txt"), "rb") as f:
        assert f.read() == b"latin-1 name"
    assert tree.scan().files == {"ok.txt": sha("ok")}


def test_the_journal_survives_a_name_that_is_not_utf8(tree: Tree, bad_names: bytes):
    for i in range(SMALL_TREE + 20):
        write(tree.root, f"bulk/{i:03}.txt", f"fixed {i}")
    journal = Journal(tree.root)
    assert journal.start()
    try:
        base = tree.scan(journal, None).files
        with open(os.path.join(bad_names, b"caf\xe9.txt"), "wb") as f:
            f.write(b"x")
        time.sleep(0.1)
        first = tree.scan(journal, base)  # the journal lost track: a full walk, which names it
        assert first.files == base and first.unversioned == ["caf\\xe9.txt"]
        # A fresh watcher takes over: once a walk has synced with it, edits are reported again.
        deadline = time.monotonic() + 10
        reported: set[str] | None = None
        while reported is None and time.monotonic() < deadline:
            tree.scan(journal, None)
            write(tree.root, "later.txt", str(time.monotonic()))
            time.sleep(0.1)
            reported = journal.take()
        assert reported == {"later.txt"}
        assert journal.running
    finally:
        journal.stop()


def test_a_folder_that_is_not_utf8_does_not_stall_snapshots(tree: Tree, bad_names: bytes):
    """Watching such a folder fails at once (registering it reports its name): snapshots then
    walk the tree, without waiting on a watcher that cannot answer."""
    for i in range(SMALL_TREE + 20):
        write(tree.root, f"bulk/{i:03}.txt", f"fixed {i}")
    journal = Journal(tree.root)
    assert journal.start()
    try:
        base = tree.scan(journal, None).files
        os.mkdir(os.path.join(bad_names, b"dir\xff"))
        time.sleep(0.1)
        for _ in range(5):
            result = tree.scan(journal, base)
            assert result.files == base and result.unversioned == ["dir\\xff"]
        assert journal.running
    finally:
        journal.stop()

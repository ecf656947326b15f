"""The journal-driven rescan: a tree too big to walk cheaply is brought up to date from the paths the
OS watcher reported. Every test makes real changes under a real watcher and checks the quick scan
against a full walk of the same directory, and that only what changed was read again."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from sidecar.workspace.blobs import BlobStore
from sidecar.workspace.tree import SMALL_TREE, TMP_SUFFIX, Files, ScanResult, Tree
from sidecar.workspace.watcher import Journal

BULK = SMALL_TREE + 20  # files enough that a scan asks the journal instead of walking


def write(root: Path, rel: str, data: str) -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(data)


@pytest.fixture
def tree(tmp_path: Path) -> Tree:
    return Tree(tmp_path / "ws", BlobStore(tmp_path / "blobs"), tmp_path / "statcache")


@pytest.fixture
def journal(tree: Tree) -> Iterator[Journal]:
    for i in range(BULK):
        write(tree.root, f"bulk/{i:03}.txt", f"file {i}")
    write(tree.root, "top.txt", "top")
    write(tree.root, "dir/a.txt", "a")
    write(tree.root, "dir/sub/b.txt", "b")
    j = Journal(tree.root)
    assert j.start()
    yield j
    j.stop()


def full_walk(tree: Tree) -> Files:
    return Tree(tree.root, tree.blobs, tree.root.parent / "fresh-cache").scan().files


def quick(tree: Tree, journal: Journal, last: Files) -> ScanResult:
    result = tree.scan(journal, last)
    assert result.files == full_walk(tree)
    return result


def baseline(tree: Tree, journal: Journal) -> Files:
    files = tree.scan(journal, None).files  # a full walk: the journal is complete from here
    assert len(files) > SMALL_TREE
    return files


def test_changed_added_and_removed_files_are_all_that_is_read(tree: Tree, journal: Journal):
    base = baseline(tree, journal)
    write(tree.root, "top.txt", "top, changed")
    write(tree.root, "dir/new.txt", "new")
    (tree.root / "bulk/000.txt").unlink()
    result = quick(tree, journal, base)
    assert result.hashed == 2  # the changed and the new file; no other file was read again
    assert "bulk/000.txt" not in result.files
    assert quick(tree, journal, result.files).hashed == 0  # nothing happened since


def test_a_removed_folder_takes_everything_under_it(tree: Tree, journal: Journal):
    base = baseline(tree, journal)
    shutil.rmtree(tree.root / "dir")
    result = quick(tree, journal, base)
    assert not [p for p in result.files if p.startswith("dir/")]
    assert result.hashed == 0


def test_a_folder_moved_elsewhere_keeps_its_files_under_the_new_name(tree: Tree, journal: Journal):
    base = baseline(tree, journal)
    os.rename(tree.root / "dir", tree.root / "moved")
    result = quick(tree, journal, base)
    assert {"moved/a.txt", "moved/sub/b.txt"} <= result.files.keys()
    assert result.files["moved/a.txt"] == base["dir/a.txt"]


def test_a_folder_replaced_by_another_of_the_same_name(tree: Tree, journal: Journal):
    base = baseline(tree, journal)
    os.rename(tree.root / "dir", tree.root / "old")
    write(tree.root, "dir/other.txt", "other")
    result = quick(tree, journal, base)
    assert "dir/a.txt" not in result.files and "dir/other.txt" in result.files
    assert result.files["old/sub/b.txt"] == base["dir/sub/b.txt"]


def test_a_file_replaced_by_a_folder_of_the_same_name(tree: Tree, journal: Journal):
    base = baseline(tree, journal)
    (tree.root / "top.txt").unlink()
    write(tree.root, "top.txt/inside.txt", "now a folder")
    result = quick(tree, journal, base)
    assert "top.txt" not in result.files and "top.txt/inside.txt" in result.files


def test_a_folder_replaced_by_a_file_of_the_same_name(tree: Tree, journal: Journal):
    base = baseline(tree, journal)
    shutil.rmtree(tree.root / "dir")
    write(tree.root, "dir", "now a file")
    result = quick(tree, journal, base)
    assert "dir" in result.files and not [p for p in result.files if p.startswith("dir/")]


def test_links_and_special_files_are_skipped_and_drop_what_they_replace(tree: Tree, journal: Journal,
                                                                           tmp_path: Path):
    base = baseline(tree, journal)
    outside = tmp_path / "outside.txt"
    outside.write_text("never read")
    (tree.root / "top.txt").unlink()
    os.symlink(outside, tree.root / "top.txt")
    os.mkfifo(tree.root / "pipe")
    result = quick(tree, journal, base)
    assert "top.txt" not in result.files and "pipe" not in result.files
    assert sorted(result.skipped) == ["pipe", "top.txt"]


def test_our_own_temporary_files_are_not_versions(tree: Tree, journal: Journal):
    base = baseline(tree, journal)
    write(tree.root, f"dir/.a.txt{TMP_SUFFIX}", "half written")
    result = quick(tree, journal, base)
    assert result.files == base and result.hashed == 0


def test_a_rescan_is_remembered_across_a_restart(tree: Tree, journal: Journal):
    base = baseline(tree, journal)
    tree.save_cache()
    write(tree.root, "top.txt", "changed again")
    result = quick(tree, journal, base)
    tree.save_cache()  # the rescan changed the stat cache: it is written
    reloaded = Tree(tree.root, tree.blobs, tree.root.parent / "statcache")
    assert reloaded.scan().hashed == 0
    assert reloaded.scan().files == result.files


def test_a_journal_that_lost_track_falls_back_to_a_full_walk(tree: Tree, journal: Journal):
    base = baseline(tree, journal)
    journal.stop()  # events from here on are not seen
    write(tree.root, "top.txt", "changed unseen")
    result = tree.scan(journal, base)
    assert result.files == full_walk(tree) and result.hashed == 1


def test_a_folder_reported_as_a_whole_is_walked_without_reading_its_files_again(tree: Tree, journal: Journal):
    base = baseline(tree, journal)
    os.chmod(tree.root / "dir", 0o700)  # an attribute change names the folder itself
    result = quick(tree, journal, base)
    assert result.files == base and result.hashed == 0

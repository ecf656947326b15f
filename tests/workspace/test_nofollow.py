"""Writes that no symbolic link can redirect, on a real folder: links planted at every component,
and folders swapped for links between the moment a folder is opened and the write."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sidecar.errors import PathRejected
from sidecar.workspace import nofollow
from sidecar.workspace.blobs import BlobStore
from sidecar.workspace.nofollow import TMP_SUFFIX
from sidecar.workspace.tree import Tree


@pytest.fixture
def places(tmp_path: Path) -> tuple[Path, Path]:
    root, outside = tmp_path / "ws", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "victim.txt").write_text("keep me")
    return root, outside


def outside_state(outside: Path) -> dict[str, bytes]:
    return {p.relative_to(outside).as_posix(): p.read_bytes() for p in sorted(outside.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("link_at", ["a", "a/b", "a/b/c"])
def test_a_link_at_any_folder_on_the_way_is_refused_and_named(places: tuple[Path, Path], link_at: str):
    root, outside = places
    (root / link_at).parent.mkdir(parents=True, exist_ok=True)
    os.symlink(outside, root / link_at)
    before = outside_state(outside)
    with pytest.raises(PathRejected, match=f"'{link_at}' is a symbolic link"):
        nofollow.write_file(root, "a/b/c/victim.txt", b"pwned")
    assert outside_state(outside) == before


def test_a_link_that_stays_inside_is_refused_too(places: tuple[Path, Path]):
    root, _ = places
    (root / "real").mkdir()
    os.symlink(root / "real", root / "alias")
    with pytest.raises(PathRejected, match="'alias' is a symbolic link"):
        nofollow.write_file(root, "alias/x.txt", b"x")
    assert list((root / "real").iterdir()) == []


def test_a_link_or_folder_at_the_name_itself_is_refused(places: tuple[Path, Path]):
    root, outside = places
    os.symlink(outside / "victim.txt", root / "notes.md")
    with pytest.raises(PathRejected, match="symbolic link"):
        nofollow.write_file(root, "notes.md", b"pwned")
    (root / "dir").mkdir()
    with pytest.raises(PathRejected, match="directory"):
        nofollow.write_file(root, "dir", b"x")
    (root / "file").write_text("f")
    with pytest.raises(PathRejected, match="'file' is a file, not a folder"):
        nofollow.write_file(root, "file/x.txt", b"x")
    assert (outside / "victim.txt").read_text() == "keep me"


def test_a_folder_swapped_for_a_link_after_it_was_opened_still_gets_the_write(places: tuple[Path, Path]):
    root, outside = places
    (root / "dir").mkdir()
    root_fd = nofollow.open_root(root)
    dir_fd = nofollow.open_dir(root_fd, "dir")
    try:
        os.rename(root / "dir", root / "moved")  # what a racing tool would do...
        os.symlink(outside, root / "dir")  # ...to make the write land outside
        nofollow.replace_at(dir_fd, "victim.txt", lambda fd: nofollow.write_bytes(fd, b"pwned"))
    finally:
        os.close(dir_fd)
        os.close(root_fd)
    assert (outside / "victim.txt").read_text() == "keep me"
    assert (root / "moved" / "victim.txt").read_bytes() == b"pwned"


def test_links_at_temporary_names_change_nothing_and_no_temporary_file_is_left(places: tuple[Path, Path]):
    root, outside = places
    (root / "notes.md").write_text("old")
    for name in (f".notes.md{TMP_SUFFIX}", f"notes.md{TMP_SUFFIX}", f".new{TMP_SUFFIX}"):
        os.symlink(outside / "victim.txt", root / name)
    assert nofollow.write_file(root, "notes.md", b"new") is False
    assert nofollow.write_file(root, "new", b"made") is True
    assert (root / "notes.md").read_bytes() == b"new" and (root / "new").read_bytes() == b"made"
    assert (outside / "victim.txt").read_text() == "keep me"
    assert len([p for p in root.iterdir() if p.is_symlink()]) == 3  # ours were never there
    assert nofollow.temp_name() != nofollow.temp_name()


def test_the_longest_legal_name_can_be_written(places: tuple[Path, Path]):
    root, _ = places
    name = "n" * 255  # its temporary sibling must fit the file system's limit too
    nofollow.write_file(root, name, b"x")
    nofollow.write_file(root, name, b"y")
    assert (root / name).read_bytes() == b"y"


def test_delete_removes_a_link_not_its_target_and_never_goes_through_one(places: tuple[Path, Path]):
    root, outside = places
    os.symlink(outside, root / "out")
    with pytest.raises(PathRejected, match="symbolic link"):
        nofollow.delete(root, "out/victim.txt")
    assert nofollow.delete(root, "out") == "link"
    assert not os.path.lexists(root / "out") and outside_state(outside) == {"victim.txt": b"keep me"}
    (root / "d" / "e").mkdir(parents=True)
    (root / "d" / "e" / "f.txt").write_text("f")
    os.symlink(outside, root / "d" / "e" / "inner")
    assert nofollow.delete(root, "d") == "folder"
    assert not (root / "d").exists() and outside_state(outside) == {"victim.txt": b"keep me"}
    assert nofollow.delete(root, "d") is None


def test_materialise_replaces_links_in_the_way_and_removes_nothing_through_them(tmp_path: Path):
    blobs = BlobStore(tmp_path / "blobs")
    tree = Tree(tmp_path / "ws", blobs, tmp_path / "cache")
    root, outside = tree.root, tmp_path / "outside"
    outside.mkdir()
    (outside / "old.txt").write_text("outside, not ours")
    v1 = {"keep/old.txt": blobs.put_bytes(b"ours"), "a/b/c/x.txt": blobs.put_bytes(b"x1")}
    v2 = {"a/b/c/x.txt": blobs.put_bytes(b"x2"), "a/b/c/y.txt": blobs.put_bytes(b"y2")}
    tree.materialize({}, v1)
    # A tool swaps folders for links after the last snapshot: one holding a file we delete, one
    # on the way to files we write.
    os.rename(root / "keep", tmp_path / "keep-moved")
    os.symlink(outside, root / "keep")
    os.rename(root / "a" / "b", tmp_path / "b-moved")
    os.symlink(outside, root / "a" / "b")
    tree.materialize(v1, v2)
    assert outside_state(outside) == {"old.txt": b"outside, not ours"}
    assert not (root / "a" / "b").is_symlink()
    assert (root / "a/b/c/x.txt").read_bytes() == b"x2" and (root / "a/b/c/y.txt").read_bytes() == b"y2"


def test_materialise_into_a_fresh_folder_writes_every_byte_and_a_stat_cache_that_holds(tmp_path: Path):
    blobs = BlobStore(tmp_path / "blobs")
    target = {f"d{i % 7}/e{i % 3}/f{i}.txt": blobs.put_bytes(f"file {i}".encode() * i) for i in range(200)}
    target["top.txt"] = blobs.put_bytes(b"top")
    tree = Tree(tmp_path / "ws", blobs, tmp_path / "cache")
    tree.materialize({}, target)
    assert {rel: (tree.root / rel).read_bytes() for rel in target} == {
        rel: blobs.path(sha).read_bytes() for rel, sha in target.items()}
    result = tree.scan()
    assert result.files == target and result.hashed == 0  # the cache from materialise was right

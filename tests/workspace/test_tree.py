"""The directory <-> files-map core: scan, materialise, the stat cache and the change journal."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from sidecar.workspace.blobs import BlobStore, MissingBlob
from sidecar.workspace.tree import Budget, Tree, diff
from sidecar.workspace.watcher import Journal


@pytest.fixture
def tree(tmp_path: Path) -> Tree:
    return Tree(tmp_path / "ws", BlobStore(tmp_path / "blobs"), tmp_path / "statcache")


def write(root: Path, rel: str, data: bytes | str) -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(data.encode() if isinstance(data, str) else data)


def read_all(root: Path) -> dict[str, bytes]:
    out = {}
    for dirpath, _, names in os.walk(root):
        for n in names:
            p = Path(dirpath) / n
            out[p.relative_to(root).as_posix()] = p.read_bytes()
    return out


def test_scan_stores_content_and_skips_links_and_reuses_hashes(tree: Tree, tmp_path: Path):
    root = tree.root
    write(root, "a.txt", "hello")
    write(root, "bin/data.bin", bytes(range(256)) * 10)
    write(root, "empty", b"")
    secret = tmp_path / "secret.txt"
    secret.write_text("outside")
    os.symlink(secret, root / "link-out")
    os.symlink("/etc", root / "dir-link")
    first = tree.scan()
    assert set(first.files) == {"a.txt", "bin/data.bin", "empty"}
    assert sorted(first.skipped) == ["dir-link", "link-out"]
    assert tree.blobs.path(first.files["a.txt"]).read_bytes() == b"hello"
    assert first.hashed == 3
    again = tree.scan()
    assert again.files == first.files and again.hashed == 0  # the stat cache did its job
    tree.save_cache()
    reloaded = Tree(root, tree.blobs, tmp_path / "statcache")
    assert reloaded.scan().hashed == 0  # and it survives a restart


def test_a_scan_within_its_budget_is_a_scan_and_one_beyond_it_changes_nothing(tree: Tree):
    root = tree.root
    for i in range(5):
        write(root, f"src/f{i}.txt", f"file {i}\n")
    last = tree.scan().files
    write(root, "src/f0.txt", "changed\n")
    write(root, "big.bin", b"x" * 5000)
    # Beyond it by bytes, then by entries: None, and the stat cache is the last full scan's.
    cached = dict(tree.cache)
    assert tree.scan_within(Budget(entries=100, bytes=4999), None, last) is None
    assert tree.scan_within(Budget(entries=3, bytes=1 << 20), None, last) is None
    assert tree.cache == cached
    inside = tree.scan_within(Budget(entries=100, bytes=5000 + len("changed\n")), None, last)
    assert inside is not None
    assert inside.files == {**last, "src/f0.txt": inside.files["src/f0.txt"], "big.bin": inside.files["big.bin"]}
    assert inside.files["src/f0.txt"] != last["src/f0.txt"]
    assert tree.blobs.path(inside.files["big.bin"]).read_bytes() == b"x" * 5000
    again = tree.scan()
    assert again.files == inside.files and again.hashed == 0  # what the budgeted scan hashed is cached


def test_materialize_round_trips_every_byte_and_touches_only_what_differs(tree: Tree):
    root = tree.root
    write(root, "keep.txt", "same")
    write(root, "change.txt", "v1")
    write(root, "gone/deep/file.txt", "bye")
    v1 = tree.scan().files
    before = read_all(root)
    write(root, "change.txt", "v2")
    write(root, "new/file.bin", os.urandom(5000))
    (root / "gone/deep/file.txt").unlink()
    v2 = tree.scan().files
    after = read_all(root)
    keep_inode = os.stat(root / "keep.txt").st_ino
    tree.materialize(v2, v1)
    assert read_all(root) == before
    assert not (root / "new").exists()  # the emptied folder went too
    assert os.stat(root / "keep.txt").st_ino == keep_inode  # untouched
    tree.materialize(v1, v2)
    assert read_all(root) == after
    assert not (root / "gone").exists()
    assert diff(v1, v2) == (["new/file.bin"], ["gone/deep/file.txt"], ["change.txt"])


def test_materialize_swaps_files_and_directories(tree: Tree):
    root = tree.root
    write(root, "thing", "a file")
    as_file = tree.scan().files
    (root / "thing").unlink()
    write(root, "thing/inside.txt", "now a folder")
    as_dir = tree.scan().files
    tree.materialize(as_dir, as_file)
    assert (root / "thing").read_text() == "a file"
    tree.materialize(as_file, as_dir)
    assert (root / "thing/inside.txt").read_text() == "now a folder"


def test_materialized_files_are_copies_not_links_to_blobs(tree: Tree):
    write(tree.root, "f.txt", "original")
    files = tree.scan().files
    tree.materialize(files, {})
    tree.materialize({}, files)
    (tree.root / "f.txt").write_text("edited by a tool")
    assert tree.blobs.path(files["f.txt"]).read_text() == "original"


def test_a_missing_blob_is_named(tree: Tree):
    write(tree.root, "f.txt", "x")
    files = tree.scan().files
    tree.blobs.path(files["f.txt"]).unlink()
    with pytest.raises(MissingBlob) as info:
        tree.materialize({}, {"g.txt": files["f.txt"]})
    assert files["f.txt"] in str(info.value)


def test_large_file_is_streamed(tree: Tree):
    big = tree.root / "big.bin"
    tree.root.mkdir(parents=True)
    with open(big, "wb") as f:
        f.truncate(64 << 20)  # sparse: cheap to make, still read and hashed whole
    import hashlib
    expected = hashlib.sha256(b"\0" * (64 << 20)).hexdigest()
    assert tree.scan().files["big.bin"] == expected


def wait_for(predicate, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline
        time.sleep(0.01)


def test_journal_scan_sees_every_kind_of_change(tree: Tree):
    root = tree.root
    write(root, "a.txt", "a")
    write(root, "dir/b.txt", "b")
    write(root, "dir/sub/c.txt", "c")
    journal = Journal(root)
    assert journal.start()
    try:
        base = tree.scan(journal, None).files  # full walk; the journal is complete from here
        write(root, "a.txt", "a changed")
        write(root, "new/n.txt", "n")
        os.rename(root / "dir", root / "moved")
        (root / "moved/sub/c.txt").unlink()
        quick = tree.scan(journal, base)
        full = Tree(root, tree.blobs, root.parent / "other-cache").scan()
        assert quick.files == full.files
        assert set(quick.files) == {"a.txt", "new/n.txt", "moved/b.txt"}
        assert tree.scan(journal, quick.files).hashed == 0  # nothing new: nothing re-read
    finally:
        journal.stop()


def test_without_a_trusted_journal_the_tree_is_walked(tree: Tree):
    write(tree.root, "a.txt", "a")
    journal = Journal(tree.root)  # never started
    assert journal.take() is None
    assert set(tree.scan(journal, {}).files) == {"a.txt"}


def test_a_symlink_in_the_way_is_replaced_never_written_through(tree: Tree, tmp_path: Path):
    root = tree.root
    write(root, "dir/file.txt", "inside")
    write(root, "top.txt", "top")
    target = tree.scan().files
    for rel in ("dir/file.txt", "top.txt"):
        (root / rel).unlink()
    (root / "dir").rmdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, root / "dir")  # a link where the target needs a folder
    os.symlink(outside / "victim.txt", root / "top.txt")  # and one where it needs a file
    current = tree.scan().files
    assert current == {}
    tree.materialize(current, target)
    assert list(outside.iterdir()) == []
    assert not (root / "dir").is_symlink() and (root / "dir/file.txt").read_text() == "inside"
    assert not (root / "top.txt").is_symlink() and (root / "top.txt").read_text() == "top"


@pytest.mark.parametrize("size", [0, 5, (1 << 20) - 1, 1 << 20, (1 << 20) + 7, 3 << 20])
def test_blobs_from_files_of_every_size_around_a_chunk_hold_their_bytes(tmp_path: Path, size: int):
    """A file under a chunk is read whole before it is stored, one of a chunk or more streamed: the
    blob holds the file's bytes either way, and a file whose content is stored already makes no
    temp file (rewritten with what it held)."""
    blobs = BlobStore(tmp_path / "blobs")
    data = os.urandom(size)
    (tmp_path / "f").write_bytes(data)
    fd = os.open(tmp_path / "f", os.O_RDONLY)
    try:
        os.lseek(fd, size // 2, os.SEEK_SET)  # from the start, whatever the offset
        sha = blobs.put_fd(fd)
        assert blobs.require(sha).read_bytes() == data
        made: list[str] = []
        real = blobs._temp  # noqa: SLF001 - counting the temp files it makes

        def counted() -> tuple[int, str]:
            made.append("temp")
            return real()

        blobs._temp = counted  # type: ignore[method-assign]  # noqa: SLF001
        assert blobs.put_fd(fd) == sha
        assert made == ([] if size < 1 << 20 else ["temp"])
    finally:
        os.close(fd)
    assert not list((tmp_path / "blobs" / "tmp").iterdir())  # nothing left behind

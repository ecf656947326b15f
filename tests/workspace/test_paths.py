from __future__ import annotations

import os
from pathlib import Path

import pytest

from sidecar.workspace import paths


@pytest.mark.parametrize("bad", [
    "", "../x", "a/../../x", "a/..", "/etc/passwd", "C:\\x", "C:/x", "c:x", "\\\\server\\x",
    "a\\b", "x\x00y", "a\nb", "a\rb", "./a", "a//b", "a/./b", "x" * 256, "a/" * 2100,
])
def test_hostile_paths_are_rejected(bad: str):
    with pytest.raises(paths.PathRejected):
        paths.check(bad)


@pytest.mark.parametrize(("good", "canonical"), [
    ("a.txt", "a.txt"), ("dir/sub/file.py", "dir/sub/file.py"), ("dir/", "dir"),
    ("ünïcode/文件.md", "ünïcode/文件.md"), ("..hidden", "..hidden"), ("a..b", "a..b"),
])
def test_ordinary_paths_are_kept(good: str, canonical: str):
    assert paths.check(good) == canonical


def test_a_symlinked_directory_cannot_lead_out(tmp_path: Path):
    root = tmp_path / "ws"
    root.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, root / "escape")
    with pytest.raises(paths.PathRejected, match="symbolic link"):
        paths.inside(root, "escape/x.txt")
    (root / "real").mkdir()
    assert paths.inside(root, "real/x.txt") == root / "real" / "x.txt"


@pytest.mark.parametrize(("bad", "rule"), [
    ("x.sidecar-tmp", "temporary files"), (".sidecar-sync-123", "sync markers"),
    ("dir/.notes.md.sidecar-tmp", "temporary files"), ("a/.sidecar-sync-1/b.txt", "sync markers"),
])
def test_names_the_sidecar_keeps_are_refused_for_writing_but_not_for_reading(bad: str, rule: str):
    with pytest.raises(paths.PathRejected, match=rule):
        paths.check_new(bad)
    assert paths.check(bad) == bad


def test_the_reserved_names_are_exactly_what_a_snapshot_leaves_out():
    from sidecar.workspace import tree, watcher

    assert (paths.RESERVED_SUFFIX, paths.RESERVED_PREFIX) == (tree.TMP_SUFFIX, watcher.COOKIE_PREFIX)
    for name in ["x.sidecar-tmp", ".sidecar-sync-9-1", "a.txt", "sidecar-tmp", ".sidecar-syncx", "x.sidecar-tmp.md"]:
        assert bool(paths.reserved(name)) == tree._ignored(name), name  # pyright: ignore[reportPrivateUsage] (the rule itself)


def test_names_too_long_for_the_file_system_say_the_limit():
    assert paths.check_new("é" * 127) == "é" * 127  # 254 bytes
    with pytest.raises(paths.PathRejected, match="256 bytes long, over the file system's limit of 255"):
        paths.check_new("é" * 128)
    with pytest.raises(paths.PathRejected, match="over the limit of 4096 bytes"):
        paths.check_new("/".join(["d" * 200] * 21))

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

"""Snapshots of a folder that changes under them (issue 18, item 4): a path flipped between file,
folder and link by another process while snapshots run. No snapshot may fail, and each one must
be a state the folder really had: never a link followed, never a mix of two states of one path.
The flipper is a real second process, so the two run truly at once on the two cores."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sidecar.workspace.blobs import BlobStore
from sidecar.workspace.tree import SMALL_TREE, Files, Tree
from sidecar.workspace.watcher import Journal

# Flips `ws/p` through: a file, a link to a file outside, a folder holding `inner`, a link to a
# folder outside (which also holds an `inner`). Each new state is made in a staging folder next to
# the workspace and renamed in whole, so every state a snapshot can meet is complete; between a
# folder and anything else `p` is briefly absent (rename cannot replace a folder by a file).
FLIPPER = r"""
import os, shutil, sys
ws, stage, outside_file, outside_dir, least, stop = sys.argv[1:7]
least = int(least)
p = os.path.join(ws, "p")
flips = 0
def clear(folder_next):
    if os.path.isdir(p) and not os.path.islink(p):
        shutil.rmtree(p)
    elif folder_next and os.path.lexists(p):  # a folder cannot be renamed over a file or link
        os.unlink(p)
while flips < least or not os.path.exists(stop):
    kind = flips % 4
    tmp = os.path.join(stage, "next")
    if kind == 0:
        with open(tmp, "w") as f:
            f.write(f"file {flips}")
    elif kind == 1:
        os.symlink(outside_file, tmp)
    elif kind == 2:
        os.mkdir(tmp)
        with open(os.path.join(tmp, "inner"), "w") as f:
            f.write(f"inner {flips}")
    else:
        os.symlink(outside_dir, tmp)
    clear(kind == 2)
    os.rename(tmp, p)
    flips += 1
print(flips)
"""

SECRET = "outside: a snapshot must never read this"


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
def outside(tmp_path: Path) -> tuple[Path, Path]:
    file = tmp_path / "outside.txt"
    file.write_text(SECRET)
    folder = tmp_path / "outside-dir"
    folder.mkdir()
    (folder / "inner").write_text(SECRET)
    return file, folder


class Flipper:
    def __init__(self, tree: Tree, outside: tuple[Path, Path], least: int) -> None:
        stage = tree.root.parent / "stage"
        stage.mkdir()
        self.stop = tree.root.parent / "stop"
        self.proc = subprocess.Popen(
            [sys.executable, "-c", FLIPPER, str(tree.root), str(stage), str(outside[0]), str(outside[1]),
             str(least), str(self.stop)],
            stdout=subprocess.PIPE, text=True,
        )

    def running(self) -> bool:
        return self.proc.poll() is None

    def finish(self) -> int:
        self.stop.touch()
        out, _ = self.proc.communicate(timeout=120)
        assert self.proc.returncode == 0
        return int(out)


def check_state(files: Files, fixed: Files, blobs: BlobStore) -> str:
    """Fail unless ``files`` is the fixed files plus one state `p` really had; returns which."""
    others = {k: v for k, v in files.items() if k != "p" and not k.startswith("p/")}
    assert others == fixed
    flipped = {k: v for k, v in files.items() if k == "p" or k.startswith("p/")}
    for content in flipped.values():
        text = blobs.path(content).read_text()
        assert text != SECRET, "a snapshot followed a link out of the workspace"
    if not flipped:
        return "absent"
    if list(flipped) == ["p"]:
        assert blobs.path(flipped["p"]).read_text().startswith("file ")
        return "file"
    assert list(flipped) == ["p/inner"], flipped
    assert blobs.path(flipped["p/inner"]).read_text().startswith("inner ")
    return "folder"


def run_flips(tree: Tree, outside: tuple[Path, Path], fixed: Files, *, flips: int, snapshots: int,
              journal: Journal | None = None) -> tuple[int, int, set[str]]:
    flipper = Flipper(tree, outside, flips)
    seen: set[str] = set()
    taken = 0
    last: Files | None = None
    # Which shapes a snapshot meets is chance (on a loaded machine the flipper may outrun the
    # scans for a while): snapshots go on, up to fifty times as many, until both were met.
    enough = False
    try:
        while not enough or flipper.running():
            result = tree.scan(journal, last)  # must never raise
            seen.add(check_state(result.files, fixed, tree.blobs))
            last = result.files if journal is not None else None
            taken += 1
            if not enough and taken >= snapshots and ({"file", "folder"} <= seen or taken >= snapshots * 50):
                enough = True
                flipper.stop.touch()
    finally:
        done = flipper.finish()
    return done, taken, seen


def test_ten_thousand_flips_during_a_thousand_snapshots_fail_none(tree: Tree, outside: tuple[Path, Path]):
    for i in range(20):
        write(tree.root, f"d{i % 3}/f{i}.txt", f"fixed {i}")
    fixed = tree.scan().files
    done, taken, seen = run_flips(tree, outside, fixed, flips=10_000, snapshots=1_000)
    assert done >= 10_000 and taken >= 1_000
    assert {"file", "folder"} <= seen  # the snapshots really met the path in both shapes
    # Once it holds still, a snapshot sees exactly what is there.
    final = tree.scan().files
    state = check_state(final, fixed, tree.blobs)
    p = tree.root / "p"
    expected = {"file": p.is_file() and not p.is_symlink(), "folder": p.is_dir() and not p.is_symlink()}
    assert state == next((k for k, v in expected.items() if v), "absent")


def test_flips_under_the_journal_driven_rescan_fail_none(tree: Tree, outside: tuple[Path, Path]):
    for i in range(SMALL_TREE + 20):  # big enough that snapshots ask the journal
        write(tree.root, f"bulk/{i:03}.txt", f"fixed {i}")
    journal = Journal(tree.root)
    assert journal.start()
    try:
        fixed = tree.scan(journal, None).files
        done, taken, seen = run_flips(tree, outside, fixed, flips=3_000, snapshots=300, journal=journal)
    finally:
        journal.stop()
    assert done >= 3_000 and taken >= 300
    assert {"file", "folder"} <= seen


def test_a_folder_swapped_for_a_link_is_not_followed_by_the_rescan(tree: Tree, outside: tuple[Path, Path]):
    """The journal names `a` and `a/secret`; by the time they are looked at, `a` is a link to a
    folder outside that holds a `secret`. Looking up `a/secret` by path would read it."""
    for i in range(SMALL_TREE + 20):
        write(tree.root, f"bulk/{i:03}.txt", f"fixed {i}")
    write(tree.root, "a/secret", "mine")
    journal = Journal(tree.root)
    assert journal.start()
    try:
        base = tree.scan(journal, None).files
        assert base["a/secret"] == sha("mine")
        (outside[1] / "secret").write_text(SECRET)
        shutil.rmtree(tree.root / "a")
        os.symlink(outside[1], tree.root / "a")
        time.sleep(0.05)
        result = tree.scan(journal, base)
    finally:
        journal.stop()
    assert not [p for p in result.files if p.startswith("a/")]
    assert "a" in result.skipped
    assert sha(SECRET) not in result.files.values()

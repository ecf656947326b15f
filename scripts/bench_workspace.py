#!/usr/bin/env python3
"""Workspace operations on a 10,000-file tree against git on the same tree, in the same run.

    .venv/bin/python scripts/bench_workspace.py [--files N] [--runs K]

Rows: snapshot with nothing changed (vs `git status`), snapshot after 100 files changed (vs
`git add -A && git commit`), switching between two versions 100 files apart (vs `git checkout`),
and materialising the whole tree into an empty workspace (vs `git checkout` into an empty work
tree). Sidecar times are the real service calls (chat lock, database, stat cache); git times
include starting git, as a user pays them. Prints a table; exits 0 (it is a report).
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _bench import run_in_temp_dir  # noqa: E402 (scripts/ is on sys.path when run as a script)

from sidecar.chat.chats import ChatService  # noqa: E402 (after the sys.path set-up above)
from sidecar.store import Database  # noqa: E402 (after the sys.path set-up above)
from sidecar.workspace.service import WorkspaceService  # noqa: E402 (after the sys.path set-up above)
from sidecar.workspace.tree import Tree  # noqa: E402 (after the sys.path set-up above)

GIT_ENV = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "b",
           "GIT_COMMITTER_EMAIL": "b@b", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}


def make_tree(root: Path, count: int, rng: random.Random) -> list[str]:
    """Shaped like a source repository: nested packages, sizes 100 B to 100 KB (mostly small)."""
    paths = []
    for i in range(count):
        depth = rng.choice((1, 2, 2, 3, 3, 4))
        parts = [f"pkg{rng.randrange(12)}"] + [f"mod{rng.randrange(6)}" for _ in range(depth - 1)]
        rel = "/".join(parts + [f"file{i}.{rng.choice(('py', 'ts', 'md', 'json', 'txt'))}"])
        size = int(min(100_000, max(100, rng.lognormvariate(7.5, 1.2))))
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(rng.randbytes(size // 2).hex().encode()[:size])
        paths.append(rel)
    return paths


def touch_files(root: Path, rels: list[str], tag: str) -> None:
    for rel in rels:
        with open(root / rel, "ab") as f:
            f.write(f"\n# changed {tag}\n".encode())


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, env=GIT_ENV, check=True, capture_output=True)


def timed_cmd(cwd: Path, script: str) -> float:
    t = time.perf_counter()
    subprocess.run(script, shell=True, cwd=cwd, env=GIT_ENV, check=True, capture_output=True)
    return (time.perf_counter() - t) * 1000


async def timed(fn: Callable[[], Awaitable[object]]) -> float:
    t = time.perf_counter()
    await fn()
    return (time.perf_counter() - t) * 1000


def median(xs: list[float]) -> float:
    return statistics.median(xs)


async def bench(files: int, runs: int, base: Path) -> list[tuple[str, float, float]]:
    rng = random.Random(7)
    db = await Database.open(base / "data" / "sidecar.db")
    watched = WorkspaceService(db, base / "data")
    chats = ChatService(watched)
    rows: list[tuple[str, float, float]] = []
    async with anyio.create_task_group() as tg:
        watched.bind(tg)
        chat = await chats.create("bench")
        ws_dir = watched.workspace_path(chat.id)
        ws_dir.mkdir(parents=True)
        paths = make_tree(ws_dir, files, rng)
        gitdir = base / "git"
        shutil.copytree(ws_dir, gitdir)
        git(gitdir, "init", "-q")
        git(gitdir, "add", "-A")
        git(gitdir, "commit", "-q", "-m", "c0")
        git(gitdir, "status", "--porcelain")  # refresh the index stat data, as a user's repo has

        async def capture() -> object:
            async with watched.locked(chat.id) as (ws, row):
                return await watched.capture(ws, row, "tool_run")

        await capture()  # the first snapshot hashes everything: m0
        await chats.add_message(chat.id, "user", "question", None)
        await capture()  # starts from a settled journal

        # 1. nothing changed
        ours = [await timed(capture) for _ in range(runs)]
        theirs = [timed_cmd(gitdir, "git status --porcelain") for _ in range(runs)]
        rows.append(("snapshot, nothing changed  (vs git status)", median(ours), median(theirs)))

        # the same without a file watcher: a full walk with the stat cache
        unwatched = WorkspaceService(db, base / "data", watch=False)

        async def capture_walk() -> object:
            async with unwatched.locked(chat.id) as (ws, row):
                return await unwatched.capture(ws, row, "tool_run")

        await capture_walk()
        walk = [await timed(capture_walk) for _ in range(runs)]
        rows.append(("  same, no watcher (full walk)", median(walk), median(theirs)))

        # 2. 100 files changed
        ours, theirs = [], []
        for r in range(runs):
            batch = rng.sample(paths, 100)
            touch_files(ws_dir, batch, f"s{r}")
            touch_files(gitdir, batch, f"s{r}")
            ours.append(await timed(capture))
            theirs.append(timed_cmd(gitdir, f"git add -A && git commit -q -m s{r}"))
        rows.append(("snapshot, 100 files changed  (vs git add+commit)", median(ours), median(theirs)))

        # 3. switch between two versions 100 files apart: two answers to one question
        q2 = await chats.add_message(chat.id, "user", "question 2", None)
        a = await chats.add_message(chat.id, "assistant", "answer A", q2.id)
        b = await chats.add_message(chat.id, "assistant", "answer B", q2.id)
        batch = rng.sample(paths, 100)
        touch_files(ws_dir, batch, "branch")
        touch_files(gitdir, batch, "branch")
        await capture()  # B's manifest
        git(gitdir, "add", "-A")
        git(gitdir, "commit", "-q", "-m", "branch")
        git(gitdir, "branch", "-q", "other", "HEAD~1")
        git(gitdir, "branch", "-q", "mine", "HEAD")
        old, new = [await chats.manifest_after(chat.id, m.id) for m in (a, b)]
        assert old is not None and new is not None
        _, _, differ = await watched.diff(chat.id, old, new)
        assert len(differ) == 100, len(differ)
        ours, theirs = [], []
        for _ in range(runs):
            ours.append(await timed(lambda: chats.switch_branch(chat.id, a.id)))
            ours.append(await timed(lambda: chats.switch_branch(chat.id, b.id)))
            theirs.append(timed_cmd(gitdir, "git checkout -q other"))
            theirs.append(timed_cmd(gitdir, "git checkout -q mine"))
        rows.append(("switch branch, 100 files differ  (vs git checkout)", median(ours), median(theirs)))

        # 4. the whole tree into an empty workspace
        _, all_files = await watched.manifest_files(chat.id, None)
        blobs = watched._workspace(chat.id).blobs
        ours, theirs = [], []
        for r in range(max(3, runs // 2)):
            empty = base / f"empty{r}"
            tree = Tree(empty, blobs, base / f"cache{r}")

            def materialize_all(tree: Tree = tree) -> None:
                tree.materialize({}, all_files)
                tree.save_cache()

            clone = base / f"clone{r}"
            await anyio.run_process(["git", "clone", "-q", "--no-checkout", str(gitdir), str(clone)], env=GIT_ENV)
            # Writing 10,000 files is disk-bound: flush earlier writes before each side and
            # alternate which side goes first, so neither pays for the other's writeback.
            for side in ((0, 1) if r % 2 == 0 else (1, 0)):
                os.sync()
                if side == 0:
                    ours.append(await timed(lambda: anyio.to_thread.run_sync(materialize_all)))
                else:
                    theirs.append(timed_cmd(clone, "git checkout -q -f mine"))
        rows.append(("materialise whole tree, empty dir  (vs git checkout)", median(ours), median(theirs)))

        await watched.aclose()
        tg.cancel_scope.cancel()
    await db.close()
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    rows = run_in_temp_dir("bench-ws-", bench, args.files, args.runs)
    git_version = subprocess.run(["git", "--version"], capture_output=True, text=True).stdout.strip()
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S')}  {platform.node()}  nproc={os.cpu_count()}  "
          f"python {platform.python_version()}  {git_version}")
    print(f"tree: {args.files} files, median of {args.runs} runs (times in ms; budget: <= git)\n")
    print(f"{'operation':<54} {'sidecar':>9} {'git':>9} {'ratio':>7}  result")
    print("-" * 90)
    for name, ours, theirs in rows:
        verdict = "info" if name.startswith("  ") else ("PASS" if ours <= theirs else "FAIL <<<")
        print(f"{name:<54} {ours:>9.1f} {theirs:>9.1f} {ours / theirs:>6.2f}x  {verdict}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

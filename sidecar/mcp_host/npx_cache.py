"""npx's shared install folders (``~/.npm/_npx/<hash>``): telling a broken one, and repairing ours.

What npx (npm 11) does on a first run, seen by running it and killing it mid-install: it makes
``<cache>/_npx/<hash>`` (the hash: sha512 of the package specs, sorted, joined by newlines, first 16
hex digits), takes a lock there (a folder, ``concurrency.lock``, whose mtime it touches every second),
unpacks every package into ``node_modules/``, and only at the end writes ``package.json`` with an
``_npx`` key. Stopped by SIGTERM, npm rolls the half-done install back and removes its lock. Killed by
SIGKILL (a sidecar killed hard takes its children along with SIGKILL), it leaves the lock, no
``package.json`` and empty package folders: the next npx, in any app on the machine, waits 60 s for the
lock to go stale and older npm versions crash on the half-filled ``node_modules`` ("Cannot find
package 'zod'").

So before the sidecar starts an npx server it looks at that folder. Broken by a start of its own (a
note in ``<data>/mcp-installs/`` says it began an install there and never saw it finish), it is moved
aside and removed: npx installs again from its download cache. Broken by someone else, it is left
alone and named, with its exact path, in the server's install progress and error.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

log = logging.getLogger("sidecar.mcp_host")

LOCK = "concurrency.lock"
LOCK_STALE = 10.0
"""npm touches a lock it holds every second: one untouched this long has no holder any more."""

State = Literal["absent", "complete", "busy", "broken"]


@dataclass(frozen=True)
class Health:
    state: State
    reason: str = ""


def cache_root(env: Mapping[str, str]) -> Path:
    """npm's cache folder for a child with ``env``: its ``npm_config_cache`` (any case), else ~/.npm."""
    for key, value in env.items():
        if key.lower() == "npm_config_cache" and value:
            return Path(value).expanduser()
    home = env.get("HOME") or os.path.expanduser("~")
    return Path(home) / ".npm"


def install_dir(packages: Sequence[str], env: Mapping[str, str]) -> Path | None:
    """The folder npx installs ``packages`` into (as libnpmexec names it); None without packages
    or for a local folder (which npx runs in place)."""
    if not packages or any(p.startswith((".", "/", "~", "file:")) for p in packages):
        return None
    joined = "\n".join(sorted(packages))
    digest = hashlib.sha512(joined.encode("utf-8")).hexdigest()[:16]
    return cache_root(env) / "_npx" / digest


def package_name(spec: str) -> str | None:
    """``@scope/name@1.2`` -> ``@scope/name``; None for what is not a registry name (git, URL, alias)."""
    if ":" in spec or spec.startswith(("git", "http")):
        return None
    if spec.startswith("@"):
        scope, _, rest = spec.partition("/")
        name = rest.split("@", 1)[0]
        return f"{scope}/{name}" if name else None
    if "/" in spec:  # user/repo on GitHub
        return None
    return spec.split("@", 1)[0] or None


def inspect(folder: Path, packages: Sequence[str], now: float | None = None) -> Health:
    """Whether npx's folder for ``packages`` holds a finished install, an install in progress, a broken
    one (with what is wrong) or nothing."""
    if not folder.is_dir():
        return Health("absent")
    lock = folder / LOCK
    try:
        age = (time.time() if now is None else now) - lock.stat().st_mtime
    except OSError:
        age = None
    if age is not None:
        if age < LOCK_STALE:
            return Health("busy")
        return Health("broken", f"a stale npx lock ({lock}, untouched for {age:.0f} s)")
    modules = folder / "node_modules"
    try:
        manifest = json.loads((folder / "package.json").read_text("utf-8"))
    except (OSError, ValueError):
        manifest = None
    if not isinstance(manifest, dict) or "_npx" not in manifest:
        if modules.is_dir():
            return Health("broken", f"a half-finished npx install (no package.json in {folder})")
        return Health("absent")
    for spec in packages:
        name = package_name(spec)
        if name is not None and not (modules / name / "package.json").is_file():
            return Health("broken", f"a half-finished npx install ({modules / name} has no package.json)")
    return Health("complete")


def remove(folder: Path) -> None:
    """Move the folder aside (one rename: an npx starting now sees it whole or not at all), then delete it."""
    aside = folder.with_name(f".covalt-removed-{folder.name}-{os.getpid()}")
    try:
        folder.rename(aside)
    except FileNotFoundError:
        return
    shutil.rmtree(aside, ignore_errors=True)


class Journal:
    """The npx folders this sidecar began an install in and has not seen finish, one small file
    each in its data directory (so it survives the sidecar being killed). Without a folder it
    remembers nothing: every broken install is then someone else's, named and left alone."""

    def __init__(self, folder: Path | None) -> None:
        self.folder = folder

    def _note(self, install: Path) -> Path | None:
        if self.folder is None:
            return None
        return self.folder / (hashlib.sha256(str(install).encode()).hexdigest()[:24] + ".json")

    def begin(self, install: Path, server: str) -> None:
        note = self._note(install)
        if note is None:
            return
        note.parent.mkdir(parents=True, exist_ok=True)
        tmp = note.with_suffix(".tmp")
        tmp.write_text(json.dumps({"path": str(install), "server": server, "pid": os.getpid()}))
        tmp.replace(note)

    def end(self, install: Path) -> None:
        note = self._note(install)
        if note is not None:
            note.unlink(missing_ok=True)

    def ours(self, install: Path) -> bool:
        note = self._note(install)
        return note is not None and note.is_file()


def _settle(folder: Path, packages: Sequence[str]) -> Health:
    """A lock in a folder our own earlier start was installing into, touched a moment ago: a live npx
    (another app's) touches it every second, one killed with our start never again. Watch it until
    it tells (at most `LOCK_STALE` and a bit): npm itself would wait 60 s before taking it over."""
    deadline = time.monotonic() + LOCK_STALE + 2
    health = inspect(folder, packages)
    while health.state == "busy" and time.monotonic() < deadline:
        time.sleep(1.0)
        health = inspect(folder, packages)
    return health


def before_start(folder: Path, packages: Sequence[str], journal: Journal, server: str) -> str | None:
    """Look at npx's folder before a start; repair it when this sidecar broke it. Returns a note for
    the user when something was found (repaired, or someone else's, named). Blocking: run in a thread."""
    health = inspect(folder, packages)
    if health.state == "busy" and journal.ours(folder):
        health = _settle(folder, packages)
    note: str | None = None
    if health.state == "broken":
        if journal.ours(folder):
            remove(folder)
            log.warning("MCP server %s: removed %s that an earlier start left; npx installs it again",
                        server, health.reason)
            note = (f"removed {health.reason}, left by an earlier start of this server that was stopped; "
                    "npx installs again")
            health = inspect(folder, packages)
        else:
            # Someone else's: named and left alone, and not noted as ours (so never removed by us).
            return (f"found {health.reason}, not left by this app: if this server does not start, remove "
                    f"{folder} (npx then installs it again)")
    if health.state != "complete":
        journal.begin(folder, server)
    return note


def after_stop(folder: Path, packages: Sequence[str], journal: Journal, server: str) -> str | None:
    """After the sidecar's npx child is gone: a finished install ends its note; one it left broken is
    removed now (it is ours). Returns a note when it removed one. Blocking: run in a thread."""
    if not journal.ours(folder):
        return None
    health = inspect(folder, packages)
    note = None
    if health.state == "broken":
        remove(folder)
        log.warning("MCP server %s: removed %s that its stopped npx left", server, health.reason)
        note = f"removed {health.reason}, left by the stopped npx"
        health = inspect(folder, packages)
    if health.state in ("complete", "absent"):
        journal.end(folder)
    return note

"""What a sandboxed stdio server must read to start: its command, the script it is given, its cwd.

A server is started as ``/path/server``, ``python /path/server.py``, ``node /proj/dist/index.js``
or ``uv run --directory /proj server``. The sandbox shows it the system and the sidecar's Python;
these are the rest, read-only:

- the command's folder (as given and with its links followed: ``~/.local/bin/uvx`` points into
  ``~/.local/share/uv``), and the folder a ``#!`` line's interpreter is in;
- for each argument that names an existing file (``/x/server.py``, ``--config=/x/c.json``), the
  project it belongs to: the nearest folder above it holding ``package.json``, ``pyproject.toml``,
  ``setup.py``, ``node_modules`` or ``.git`` (a script imports its neighbours and its project's
  packages), else its own folder;
- its working folder (cwd).

Never a folder that holds the app's data directory (the database, the secret file and every
chat's workspace), the whole home folder or ``/``: for a file there, the file alone is shown; such
a working folder is left out and `unseen` warns about it. `unseen` also names what still stays
hidden (an argument that is a folder, a package runner that needs the network to download), for the
warning mcpServers/add gives.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from ..sandbox.policy import Confinement

_PROJECT_MARKS = ("package.json", "pyproject.toml", "setup.py", "setup.cfg", "node_modules", ".git")
# Package runners that download what they run at start; they need a network to do it.
_RUNNERS = {"npx": "the npm registry", "uvx": "PyPI", "pipx": "PyPI", "bunx": "the npm registry",
            "pnpm": "the npm registry", "docker": "a container registry"}
_MAX_UP = 8  # folders climbed looking for a project's root


def _too_wide(folder: str, private: Sequence[str]) -> bool:
    """``folder`` is ``/``, the home folder or one above it, or holds (or is in) the data directory."""
    folder = os.path.normpath(folder)
    home = os.path.normpath(os.path.expanduser("~"))
    if folder == os.sep or folder == home or home.startswith(folder.rstrip(os.sep) + os.sep):
        return True
    for p in private:
        p = os.path.normpath(p)
        if p == folder or p.startswith(folder.rstrip(os.sep) + os.sep) or folder.startswith(p + os.sep):
            return True
    return False


def _project_of(path: str, private: Sequence[str]) -> str:
    """The folder to show for a file ``path``: its project's root, its own folder, or the file alone."""
    folder = os.path.dirname(path)
    probe = folder
    for _ in range(_MAX_UP):
        if _too_wide(probe, private):
            break
        if any(os.path.exists(os.path.join(probe, mark)) for mark in _PROJECT_MARKS):
            return probe
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    return path if _too_wide(folder, private) else folder


def _file_args(args: Sequence[str], cwd: str | None) -> list[str]:
    """The arguments (or ``--flag=value`` values) that name an existing file, made absolute."""
    found: list[str] = []
    for arg in args:
        for candidate in (arg, arg.partition("=")[2]):
            if not candidate or candidate.startswith("-"):
                continue
            path = candidate if os.path.isabs(candidate) else os.path.join(cwd, candidate) if cwd else None
            if path is not None and os.path.isfile(path):
                found.append(os.path.normpath(path))
                break
    return found


def _interpreter(program: str) -> str | None:
    """The interpreter a ``#!`` script names (``#!/usr/bin/env node`` names env, found anyway)."""
    try:
        with open(program, "rb") as f:
            head = f.read(256)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    words = head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").split()
    return words[0] if words and os.path.isabs(words[0]) else None


def readable(program: str, args: Sequence[str], cwd: str | None, private: Sequence[str] = ()) -> list[str]:
    """The folders and files a sandboxed server started as ``program args`` in ``cwd`` reads, read-only
    (``private``: the app's data directory, never shown). Blocking: a few stats."""
    shown: set[str] = set()
    for path in {program, os.path.realpath(program)}:
        folder = os.path.dirname(path)
        shown.add(path if _too_wide(folder, private) else folder)
    interpreter = _interpreter(program)
    if interpreter is not None:
        folder = os.path.dirname(os.path.realpath(interpreter))
        shown.add(interpreter if _too_wide(folder, private) else folder)
    for path in _file_args(args, cwd):
        shown.add(_project_of(path, private))
        real = os.path.realpath(path)
        if real != path:
            shown.add(_project_of(real, private))
    if cwd and not _too_wide(cwd, private):
        shown.add(os.path.normpath(cwd))
    return sorted(p for p in shown if p)


def _inside(path: str, roots: Sequence[str]) -> bool:
    path = os.path.normpath(path)
    return any(path == r or path.startswith(r.rstrip(os.sep) + os.sep) for r in roots)


def unseen(program: str, args: Sequence[str], cwd: str | None, confinement: Confinement,
           private: Sequence[str] = (), system: Sequence[str] = ()) -> list[str]:
    """What a server sandboxed by ``confinement`` will not see or reach although its declaration
    names it, each with the setting that changes it (the warnings of mcpServers/add). ``system``:
    what the sandbox shows anyway (the system's folders and the sidecar's Python)."""
    found: list[str] = []
    shown = [*readable(program, args, cwd, private), *confinement.writable, *system]
    if cwd and not _inside(cwd, shown):
        found.append(f"its working folder {cwd} is not shown to it: the sandbox never shows the whole home "
                     "folder, / or the app's data directory; set cwd to the folder it needs")
    for i, arg in enumerate(args):
        path = arg if os.path.isabs(arg) else None
        if path is not None and os.path.isdir(path) and not _inside(path, shown):
            found.append(f"args[{i}] {path} is a folder the sandbox does not show it; list it in "
                         "sandbox.writable (which lets it read and write there), or run it without sandbox")
    for path in _file_args(args, cwd):
        if not _inside(path, shown):
            found.append(f"{path} is not shown to it; move it out of the home folder's top or the app's data "
                         "directory")
    name = os.path.basename(program).removesuffix(".cmd").removesuffix(".exe")
    if name in _RUNNERS and confinement.network == "none":
        found.append(f"{name} downloads the server from {_RUNNERS[name]} when it starts, which sandbox.network none "
                     "forbids: set sandbox.network to full (or allowedHosts with the registry's hosts)")
    return found

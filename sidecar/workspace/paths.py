"""Workspace paths from outside are hostile until checked.

A workspace path on the wire is relative, '/'-separated, and names something inside the root:
no absolute paths, drive letters, UNC prefixes, '..', NUL or other control characters, and no
component that is empty or '.'. ``check`` returns the canonical form or raises ``PathRejected``.
``check_new`` is for a path something is about to be written at: it also refuses the names the
sidecar keeps for itself, which a snapshot leaves out (a file written under one would silently
never be versioned).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from ..errors import PathRejected

_DRIVE = re.compile(r"^[A-Za-z]:")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
MAX_PATH_BYTES = 4096  # PATH_MAX on Linux
MAX_COMPONENT_BYTES = 255  # NAME_MAX of every file system we run on
# The sidecar's own transient names, left out of every snapshot (tree.TMP_SUFFIX and
# watcher.COOKIE_PREFIX; repeated here so checking a path imports no file-system machinery).
RESERVED_SUFFIX = ".sidecar-tmp"
RESERVED_PREFIX = ".sidecar-sync-"


def check(path: str) -> str:
    if not path:
        raise PathRejected("the path is empty")
    if _CONTROL.search(path):
        raise PathRejected("the path contains a control character (NUL, newline, ...)")
    if "\\" in path:
        raise PathRejected("use '/' as the separator; backslashes are not allowed")
    if path.startswith("/") or _DRIVE.match(path):
        raise PathRejected("the path must be relative to the workspace, not absolute")
    size = len(path.encode("utf-8", "surrogatepass"))
    if size > MAX_PATH_BYTES:
        raise PathRejected(f"the path is {size} bytes long, over the limit of {MAX_PATH_BYTES} bytes "
                           "(UTF-8); use a shorter path")
    parts = path.split("/")
    if parts[-1] == "":
        parts.pop()  # one trailing slash is tolerated
    for part in parts:
        if part in ("", "."):
            raise PathRejected("the path has an empty or '.' component")
        if part == "..":
            raise PathRejected("'..' is not allowed in workspace paths")
        size = len(part.encode("utf-8", "surrogatepass"))
        if size > MAX_COMPONENT_BYTES:
            raise PathRejected(f"the name {part[:40]!r}... is {size} bytes long, over the file system's limit "
                               f"of {MAX_COMPONENT_BYTES} bytes (UTF-8) for one name; use a shorter name")
    return "/".join(parts)


def check_new(path: str) -> str:
    """``check``, and no component named like the sidecar's own transient files."""
    rel = check(path)
    for part in rel.split("/"):
        if rule := reserved(part):
            raise PathRejected(f"{part!r} {rule}; choose another name")
    return rel


def reserved(name: str) -> str | None:
    """Why the sidecar keeps ``name`` for itself, or None when it is free to use."""
    if name.endswith(RESERVED_SUFFIX):
        return f"ends with {RESERVED_SUFFIX!r}, which the sidecar keeps for its temporary files"
    if name.startswith(RESERVED_PREFIX):
        return f"starts with {RESERVED_PREFIX!r}, which the sidecar keeps for its sync markers"
    return None


def inside(root: Path, rel: str) -> Path:
    """Join a checked path to ``root`` and make sure no symlink on the way leads out of it."""
    rel = check(rel)
    target = root.joinpath(*rel.split("/"))
    parent = target.parent
    real_root = os.path.realpath(root)
    real_parent = os.path.realpath(parent)
    if real_parent != real_root and not real_parent.startswith(real_root + os.sep):
        raise PathRejected("the path leads out of the workspace through a symbolic link")
    return target

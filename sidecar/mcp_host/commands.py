"""Finding a stdio server's command.

Desktop apps start with a thin PATH (launchd, a .desktop file), so `npx`, `uvx` and friends that the
user's shell finds are often missing from ours. We look on the PATH the child will get first, then on
the user's login-shell PATH (`$SHELL -lc 'printf ...'`, asked once per process, with a timeout), and
when the command comes from there the child gets that PATH too (so `#!/usr/bin/env node` works).
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass

import anyio
import anyio.to_thread

from ..children import scrubbed_env

log = logging.getLogger(__name__)

LOGIN_SHELL_TIMEOUT = 5.0
_MARK = "__covalt_path__"

_login_path: str | None = None
_login_path_known = False
_login_lock: anyio.Lock | None = None


class CommandNotFound(Exception):
    def __init__(self, command: str, searched: list[tuple[str, str]]) -> None:
        self.command = command
        self.searched = searched
        where = "; ".join(f"{label} {path or '(empty)'}" for label, path in searched)
        super().__init__(f"command not found: {command!r} (searched {where})")


@dataclass(frozen=True)
class ResolvedCommand:
    path: str
    """The executable to run."""
    child_path: str
    """The PATH the child should get."""
    via_login_shell: bool


def _query_login_shell_path() -> str | None:
    """Blocking: ask the user's login shell for its PATH. Run in a worker thread."""
    if sys.platform == "win32":
        return None
    shell = os.environ.get("SHELL") or "/bin/sh"
    if not os.path.isabs(shell) or not os.access(shell, os.X_OK):
        return None
    try:
        proc = subprocess.run(
            [shell, "-lc", f'printf "%s%s%s" {_MARK} "$PATH" {_MARK}'],
            stdin=subprocess.DEVNULL, capture_output=True, timeout=LOGIN_SHELL_TIMEOUT,
            env=scrubbed_env(), start_new_session=True, check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        log.warning("could not ask the login shell %s for its PATH: %s", shell, exc)
        return None
    out = proc.stdout.decode("utf-8", "replace")
    parts = out.split(_MARK)
    if len(parts) < 3:
        log.warning("the login shell %s printed no PATH (exit code %s)", shell, proc.returncode)
        return None
    return parts[-2]


def forget_login_shell_path() -> None:
    """Drop the cached login-shell PATH (tests; or after the user changed their shell profile)."""
    global _login_path, _login_path_known
    _login_path, _login_path_known = None, False


async def login_shell_path() -> str | None:
    """The user's login-shell PATH, cached for the life of the process (None if it can't be had)."""
    global _login_path, _login_path_known, _login_lock
    if _login_path_known:
        return _login_path
    if _login_lock is None:
        _login_lock = anyio.Lock()
    async with _login_lock:
        if not _login_path_known:
            # A worker thread, abandoned on cancel: the subprocess has its own timeout.
            _login_path = await anyio.to_thread.run_sync(_query_login_shell_path, abandon_on_cancel=True)
            _login_path_known = True
            if _login_path:
                log.debug("login shell PATH: %s", _login_path)
    return _login_path


def _which(command: str, path: str, cwd: str | None) -> str | None:
    if os.sep in command or (os.altsep and os.altsep in command):
        candidate = command if os.path.isabs(command) else os.path.join(cwd or os.getcwd(), command)
        return candidate if os.path.isfile(candidate) and os.access(candidate, os.X_OK) else None
    return shutil.which(command, path=path)


def _merge_paths(first: str, second: str) -> str:
    seen: list[str] = []
    for part in first.split(os.pathsep) + second.split(os.pathsep):
        if part and part not in seen:
            seen.append(part)
    return os.pathsep.join(seen)


async def resolve_command(command: str, child_path: str, cwd: str | None = None) -> ResolvedCommand:
    """Find `command` on `child_path`, else on the login-shell PATH.

    Raises:
        CommandNotFound: naming the command and every PATH searched.
    """
    found = await anyio.to_thread.run_sync(_which, command, child_path, cwd)
    if found:
        return ResolvedCommand(found, child_path, False)
    searched = [("PATH", child_path)]
    if os.sep not in command:
        shell_path = await login_shell_path()
        if shell_path:
            found = await anyio.to_thread.run_sync(_which, command, shell_path, cwd)
            if found:
                log.info("found %r through the login shell's PATH: %s", command, found)
                return ResolvedCommand(found, _merge_paths(shell_path, child_path), True)
            searched.append(("the login shell's PATH", shell_path))
    raise CommandNotFound(command, searched)

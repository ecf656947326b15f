"""The authoring loop: a toolset imported from a folder follows that folder.

Saving a tool's module or the manifest re-imports the toolset (new revision, tools described
again, workers restarted), so authors iterate without importing by hand. An edit that breaks the
toolset is reported and the last good revision keeps serving; the next good save replaces it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
from anyio.abc import TaskGroup

from ..errors import SidecarError

if TYPE_CHECKING:
    from .service import ToolsetService

log = logging.getLogger("sidecar.toolsets")

# (toolset id, None after a good reload or the error of a failed one as (path, reason))
Reported = Callable[[str, "tuple[str, str] | None"], Awaitable[None]]

DEBOUNCE_MS = 150  # editors save in bursts (temp file, rename, chmod): reload once per burst
_IGNORED_DIRS = {"__pycache__", ".git", ".hg", ".svn", ".mypy_cache", ".pytest_cache", "node_modules"}
_IGNORED_SUFFIXES = (".pyc", ".swp", ".swx", ".tmp", "~")


class LocalToolsets:
    def __init__(self, service: ToolsetService, report: Reported) -> None:
        self.service = service
        self.report = report
        self._tg: TaskGroup | None = None
        self._scope: anyio.CancelScope | None = None
        self._stop: anyio.Event | None = None
        self._watched: dict[Path, str] = {}

    async def bind(self, tg: TaskGroup) -> None:
        self._tg = tg
        await self.refresh()

    async def refresh(self, _changed: str | None = None) -> None:
        """Watch the folders of the installed local toolsets (after an import or uninstall)."""
        if self._tg is None:
            return
        local = {Path(t.source_ref): t.id for t in await self.service.all()
                 if t.source_type == "local" and t.source_ref}
        wanted = await anyio.to_thread.run_sync(_existing, local)
        if wanted == self._watched:
            return
        self.close()
        self._watched = wanted
        if wanted:
            self._scope, self._stop = anyio.CancelScope(), anyio.Event()
            self._tg.start_soon(self._watch, dict(wanted), self._scope, self._stop)

    def close(self) -> None:
        if self._stop is not None:
            self._stop.set()
        if self._scope is not None:
            self._scope.cancel()
        self._scope = self._stop = None
        self._watched = {}

    async def _watch(self, folders: dict[Path, str], scope: anyio.CancelScope, stop: anyio.Event) -> None:
        # A Rust extension: loaded only when a local toolset exists. Its stop_event type names
        # trio.Event, unknown here (trio is not installed); we pass an anyio.Event.
        from watchfiles import awatch  # pyright: ignore[reportUnknownVariableType]

        with scope:
            async for changes in awatch(*folders, watch_filter=_relevant, debounce=DEBOUNCE_MS,
                                        step=30, stop_event=stop, recursive=True):
                touched = {folders[root] for _, changed in changes for root in folders
                           if Path(changed).is_relative_to(root)}
                for toolset_id in sorted(touched):
                    await self._reload(toolset_id)

    async def _reload(self, toolset_id: str) -> None:
        try:
            row = await self.service.get(toolset_id)
            await self.service.install(row.source_ref or "", replace=True)
        except SidecarError as exc:
            data = exc.data or {}
            log.warning("reloading toolset %s failed; the last good version stays: %s", toolset_id, exc.message)
            await self.report(toolset_id, (str(data.get("path", "")), str(data.get("reason", exc.message))))
            return
        except Exception as exc:  # whatever an edit does, the watcher (and the sidecar) carry on
            log.exception("reloading toolset %s failed", toolset_id)
            await self.report(toolset_id, ("", f"{type(exc).__name__}: {exc}"))
            return
        log.info("reloaded toolset %s from %s", toolset_id, row.source_ref)
        await self.report(toolset_id, None)


def _relevant(change: object, path: str) -> bool:
    p = Path(path)
    return not (_IGNORED_DIRS.intersection(p.parts) or p.name.endswith(_IGNORED_SUFFIXES)
                or p.name.startswith(".#"))


def _existing(folders: dict[Path, str]) -> dict[Path, str]:
    return {folder: toolset_id for folder, toolset_id in folders.items() if folder.is_dir()}

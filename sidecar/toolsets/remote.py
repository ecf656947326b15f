"""Toolsets installed from a URL: the import, the check for a newer bundle, and the upgrade in place.

The download is download.py's (https, checked addresses, size limit, sha256); what it brings is
installed exactly as a file import is (service.py ``install``: the same bundle checks, one
transaction), with the URL kept as ``sourceRef`` and the bundle's digest and its server's ETag /
Last-Modified kept beside it (store/toolset_sources.py). An upgrade is that install with
``replace``: the overrides the user made, the config values the new schema still has and the
secrets (stored by name, outside the toolset) stay.
"""

from __future__ import annotations

import logging
import zipfile
from dataclasses import dataclass
from pathlib import Path

import anyio
import anyio.to_thread

from .. import frozen
from ..errors import Conflict, InvalidBundle
from ..secrets import mask_url
from ..store.rows import now
from ..store.toolset_sources import ToolsetSourceRepo
from ..store.toolsets import ToolsetRow
from .download import Downloader, Fetched, Progress, Validators, check_sha256, check_url
from .service import Remote, ToolsetService

log = logging.getLogger("sidecar.toolsets")


@dataclass(frozen=True, slots=True)
class UpdateCheck:
    toolset_id: str
    url: str
    update_available: bool
    current_version: str
    current_sha256: str | None  # None: installed before digests were kept
    available_version: str | None = None  # None when nothing newer is there
    available_sha256: str | None = None
    not_modified: bool = False  # the server answered 304 to the installed bundle's validators


class RemoteBundles:
    def __init__(self, toolsets: ToolsetService, downloader: Downloader) -> None:
        self.toolsets = toolsets
        self.downloader = downloader
        self.sources = ToolsetSourceRepo(toolsets.db)

    async def install(self, url: str, *, sha256: str | None = None, replace: bool = False,
                      on_progress: Progress | None = None) -> ToolsetRow:
        """toolsets/import {url}: download, check, install (replace: upgrade an installed one of that id)."""
        url, sha256 = check_url(url), check_sha256(sha256)
        fetched = await self.downloader.fetch(url, sha256=sha256, on_progress=on_progress)
        assert fetched is not None  # no validators given: never "not modified"
        return await self._install(url, fetched, replace=replace, upgrade_of=None)

    async def check_update(self, toolset_id: str) -> UpdateCheck:
        """Ask the toolset's URL whether its bundle changed (a conditional GET when the server gave
        validators), and if it did, which version the new bundle is."""
        row, url = await self._url_toolset(toolset_id)
        source = await self.sources.get(toolset_id)
        known = Validators(source.etag, source.last_modified) if source is not None else None
        fetched = await self.downloader.fetch(url, known=known)
        current_sha = source.sha256 if source is not None else None
        if fetched is None or fetched.sha256 == current_sha:
            if fetched is not None:
                await _remove(fetched.path)
            await self._same(toolset_id, fetched)
            return UpdateCheck(toolset_id, url, False, row.version, current_sha, not_modified=fetched is None)
        await self.sources.checked(toolset_id, now())
        try:
            bundle = await self.toolsets.read(str(fetched.path))
        finally:
            await _remove(fetched.path)
        return UpdateCheck(toolset_id, url, True, row.version, current_sha,
                           available_version=bundle.manifest.version, available_sha256=fetched.sha256)

    async def upgrade(self, toolset_id: str, *, sha256: str | None = None,
                      on_progress: Progress | None = None) -> tuple[ToolsetRow, bool]:
        """Install the bundle now at the toolset's URL over it; False when it is the one installed."""
        _row, url = await self._url_toolset(toolset_id)
        sha256 = check_sha256(sha256)
        source = await self.sources.get(toolset_id)
        fetched = await self.downloader.fetch(url, sha256=sha256, on_progress=on_progress)
        assert fetched is not None
        if source is not None and fetched.sha256 == source.sha256:
            await _remove(fetched.path)
            await self._same(toolset_id, fetched)
            return await self.toolsets.get(toolset_id), False
        return await self._install(url, fetched, replace=True, upgrade_of=toolset_id), True

    async def _same(self, toolset_id: str, fetched: Fetched | None) -> None:
        """The installed bundle is still current: note when, and the validators it came with this time
        (a server that gave none at install may give an ETag now)."""
        await self.sources.checked(toolset_id, now(),
                                   None if fetched is None else (fetched.etag, fetched.last_modified))

    async def _install(self, url: str, fetched: Fetched, *, replace: bool, upgrade_of: str | None) -> ToolsetRow:
        try:
            if not await anyio.to_thread.run_sync(zipfile.is_zipfile, fetched.path):
                kind = f" ({fetched.content_type})" if fetched.content_type else ""
                raise InvalidBundle("", f"what {mask_url(url)} served{kind} is not a ZIP file; give the URL of "
                                        "the bundle's .zip itself")
            remote = Remote(url, fetched.sha256, fetched.size, fetched.etag, fetched.last_modified, upgrade_of)
            row = await self.toolsets.install(str(fetched.path), replace=replace, remote=remote)
        finally:
            await _remove(fetched.path)
        log.info("installed toolset %s %s from %s (%d bytes, sha256 %s)", row.id, row.version, mask_url(url),
                 fetched.size, fetched.sha256)
        return row

    async def _url_toolset(self, toolset_id: str) -> tuple[ToolsetRow, str]:
        row = await self.toolsets.get(toolset_id)
        frozen.refuse_if_deleted(toolset_id, row.soft_deleted_at, "check for or install its updates")
        if row.source_type != "url" or not row.source_ref:
            raise Conflict("not from a URL", f"the toolset {toolset_id!r} was not installed from a URL "
                                             f"(its source is {row.source_type}); import the new bundle instead")
        return row, row.source_ref


async def _remove(path: Path) -> None:
    with anyio.CancelScope(shield=True):
        await anyio.to_thread.run_sync(lambda: path.unlink(missing_ok=True))

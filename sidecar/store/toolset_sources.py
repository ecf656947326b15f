"""What a URL import recorded about the bundle it installed (migration 0010): its digest and its
server's validators, so checkUpdate can ask "changed since?" and compare."""

from __future__ import annotations

from typing import Any

import aiosqlite
import msgspec

from .db import Database


class SourceRow(msgspec.Struct, kw_only=True):
    toolset_id: str
    sha256: str  # of the bundle ZIP as downloaded
    size: int
    etag: str | None = None
    last_modified: str | None = None
    fetched_at: str
    checked_at: str | None = None


_COLS = "toolset_id, sha256, size, etag, last_modified, fetched_at, checked_at"


async def replace(w: aiosqlite.Connection, toolset_id: str, source: SourceRow | None) -> None:
    """Inside an install's transaction: the toolset's source is ``source`` now (None: not a URL)."""
    await w.execute("DELETE FROM toolset_sources WHERE toolset_id = ?", (toolset_id,))
    if source is not None:
        await w.execute(f"INSERT INTO toolset_sources ({_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
                        (toolset_id, source.sha256, source.size, source.etag, source.last_modified,
                         source.fetched_at, source.checked_at))


def _row(r: Any) -> SourceRow:
    return SourceRow(toolset_id=r["toolset_id"], sha256=r["sha256"], size=r["size"], etag=r["etag"],
                     last_modified=r["last_modified"], fetched_at=r["fetched_at"], checked_at=r["checked_at"])


class ToolsetSourceRepo:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def get(self, toolset_id: str) -> SourceRow | None:
        row = await self.db.fetchone(f"SELECT {_COLS} FROM toolset_sources WHERE toolset_id = ?", (toolset_id,))
        return _row(row) if row is not None else None

    async def checked(self, toolset_id: str, stamp: str, fetched: tuple[str | None, str | None] | None = None) -> None:
        """Its server was asked at ``stamp``; ``fetched``: it sent the installed bundle again, with
        these (ETag, Last-Modified), kept for the next conditional GET."""
        async with self.db.write() as w:
            await w.execute("UPDATE toolset_sources SET checked_at = ? WHERE toolset_id = ?", (stamp, toolset_id))
            if fetched is not None:
                await w.execute("UPDATE toolset_sources SET etag = ?, last_modified = ? WHERE toolset_id = ?",
                                (*fetched, toolset_id))

"""The cached sentence embeddings of tools' text (``tool_embeddings``, migration 0017): vectors as
float32 blobs, by model and text digest."""

from __future__ import annotations

from collections.abc import Sequence

from .db import Database

CHUNK = 500  # digests per IN (...): under SQLite's bound on variables, few round trips for 5,000


class ToolEmbeddingsRepo:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def get(self, model: str, hashes: Sequence[bytes]) -> dict[bytes, bytes]:
        """The stored vectors of these digests (absent: never embedded by this model)."""
        found: dict[bytes, bytes] = {}
        for start in range(0, len(hashes), CHUNK):
            part = hashes[start:start + CHUNK]
            rows = await self.db.fetchall(
                f"SELECT text_hash, vector FROM tool_embeddings WHERE model = ? AND text_hash IN "
                f"({', '.join('?' * len(part))})", (model, *part))
            found.update((bytes(r[0]), bytes(r[1])) for r in rows)
        return found

    async def put(self, model: str, vectors: Sequence[tuple[bytes, bytes]]) -> None:
        """(digest, vector) pairs, one transaction; a digest stored already keeps its row."""
        async with self.db.write() as w:
            await w.executemany("INSERT OR IGNORE INTO tool_embeddings (model, text_hash, vector) VALUES (?, ?, ?)",
                                [(model, h, v) for h, v in vectors])

    async def count(self, model: str) -> int:
        row = await self.db.fetchone("SELECT count(*) FROM tool_embeddings WHERE model = ?", (model,))
        return int(row[0]) if row is not None else 0

    async def prune(self, model: str, keep: set[bytes]) -> int:
        """Drop this model's vectors of texts not in ``keep`` and every other model's; how many went."""
        rows = await self.db.fetchall("SELECT text_hash FROM tool_embeddings WHERE model = ?", (model,))
        stale = [(model, h) for r in rows if (h := bytes(r[0])) not in keep]
        async with self.db.write() as w:
            other = await w.execute("DELETE FROM tool_embeddings WHERE model <> ?", (model,))
            await w.executemany("DELETE FROM tool_embeddings WHERE model = ? AND text_hash = ?", stale)
            return len(stale) + max(other.rowcount, 0)

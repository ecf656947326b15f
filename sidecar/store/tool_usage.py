"""How often each tool ran and when it last did (``tool_usage``), for every provider.

Counted where the tool call records are written, in their transaction (``counts``): a call counts
once it ran, whatever its outcome (a failure or a kill mid-run counts), and not when it was refused
before it ran (kill switch off, confirmation denied, unknown tool, bad arguments, config missing):
such a record has no duration. ``lastCalledAt`` is when the latest counted call started.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import msgspec

from .db import Database

if TYPE_CHECKING:
    from .tool_calls import ToolCallRow


class Usage(msgspec.Struct, frozen=True):
    call_count: int
    last_called_at: str | None


UPSERT = ("INSERT INTO tool_usage (tool_id, call_count, last_called_at) VALUES (?, ?, ?) "
           "ON CONFLICT (tool_id) DO UPDATE SET call_count = call_count + excluded.call_count, "
           "last_called_at = coalesce(max(last_called_at, excluded.last_called_at), last_called_at, "
           "excluded.last_called_at)")


def counts(calls: Iterable[ToolCallRow]) -> list[tuple[str, int, str]]:
    """``UPSERT``'s rows for the calls that ran: one per tool however many calls of it the batch
    holds. Written in the transaction that writes the records (``store.tool_calls``)."""
    counted: dict[str, tuple[int, str]] = {}
    for c in calls:
        if c.duration_ms is None:
            continue
        count, last = counted.get(c.tool_id, (0, c.started_at))
        counted[c.tool_id] = (count + 1, max(last, c.started_at))
    return [(tool_id, n, last) for tool_id, (n, last) in counted.items()]


class ToolUsageRepo:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def of(self, tool_ids: list[str]) -> dict[str, Usage]:
        """The usage of these tools (a page's worth); a tool never run is absent."""
        if not tool_ids:
            return {}
        found: dict[str, Usage] = {}
        for i in range(0, len(tool_ids), 500):  # under SQLite's bound on host parameters
            chunk = tool_ids[i:i + 500]
            rows = await self.db.fetchall(
                f"SELECT tool_id, call_count, last_called_at FROM tool_usage WHERE tool_id IN "
                f"({', '.join('?' * len(chunk))})", chunk)
            found.update({r[0]: Usage(r[1], r[2]) for r in rows})
        return found

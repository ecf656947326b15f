"""Small helpers shared by the repositories."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

import aiosqlite
import msgspec

S = TypeVar("S", bound=msgspec.Struct)


def json_text(value: Any) -> str:
    """``value`` as JSON text, as the JSON columns store it."""
    return msgspec.json.encode(value).decode()


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def named(cls: type[S], row: aiosqlite.Row, **decoded: Any) -> S:
    """A row as ``cls``, field by column name (never by position), with its ``Literal`` fields
    checked; ``decoded`` replaces the columns stored as JSON with their values."""
    fields = dict(row)
    fields.update(decoded)
    return msgspec.convert(fields, cls)


# uuid7 keeps ids in creation order, which makes the message tree and manifests sort naturally.
# Python 3.14 has it; earlier versions use the same layout built by hand.
_uuid7: Callable[[], uuid.UUID] | None = getattr(uuid, "uuid7", None)


def new_id() -> str:
    return str(_uuid7()) if _uuid7 is not None else _uuid7_by_hand()


def _uuid7_by_hand() -> str:
    ms = time.time_ns() // 1_000_000
    rand = int.from_bytes(os.urandom(10), "big")
    value = (ms & ((1 << 48) - 1)) << 80 | 0x7 << 76 | (rand >> 68 & 0xFFF) << 64
    value |= 0b10 << 62 | (rand & ((1 << 62) - 1))
    return str(uuid.UUID(int=value))

"""Small helpers shared by the repositories."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

import aiosqlite
import msgspec

S = TypeVar("S", bound=msgspec.Struct)


def json_text(value: Any) -> str:
    """``value`` as JSON text, as the JSON columns store it."""
    return msgspec.json.encode(value).decode()


def now() -> str:
    """UTC, ``2026-01-02T03:04:05.678901Z`` (what ``datetime.isoformat`` writes, with ``Z``)."""
    # Every tool call takes two of these: the seconds are formatted once per second, not each time.
    global _second, _second_text
    us = time.time_ns() // 1000
    second, micro = divmod(us, 1_000_000)
    if second != _second:
        _second_text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        _second = second
    return f"{_second_text}.{micro:06d}Z"


_second = -1
_second_text = ""


def stamp_of(seconds: float) -> str:
    """A Unix time as ``now()`` writes one (so stamps compare as text)."""
    whole = int(seconds)
    micro = int(round((seconds - whole) * 1_000_000))
    if micro >= 1_000_000:
        whole, micro = whole + 1, micro - 1_000_000
    return f"{time.strftime('%Y-%m-%dT%H:%M:%S', time.gmtime(whole))}.{micro:06d}Z"


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
    # str(uuid.UUID(int=value)), without building the UUID (one per tool call and message).
    h = f"{value:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"

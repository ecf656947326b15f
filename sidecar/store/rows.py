"""Small helpers shared by the repositories."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def new_id() -> str:
    # uuid7 keeps ids in creation order, which makes the message tree and manifests sort naturally.
    return str(uuid.uuid7()) if hasattr(uuid, "uuid7") else _uuid7()


def _uuid7() -> str:
    import os
    import time

    ms = time.time_ns() // 1_000_000
    rand = int.from_bytes(os.urandom(10), "big")
    value = (ms & ((1 << 48) - 1)) << 80 | 0x7 << 76 | (rand >> 68 & 0xFFF) << 64
    value |= 0b10 << 62 | (rand & ((1 << 62) - 1))
    return str(uuid.UUID(int=value))

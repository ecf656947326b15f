"""The ids and timestamps every record gets."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime

from sidecar.store.rows import new_id, now


def test_now_is_utc_iso_with_microseconds_and_z() -> None:
    before = datetime.now(UTC)
    stamps = [now() for _ in range(3)]
    after = datetime.now(UTC)
    for stamp in stamps:
        assert len(stamp) == 27 and stamp.endswith("Z") and stamp[10] == "T" and stamp[19] == ".", stamp
        assert before <= datetime.fromisoformat(stamp.replace("Z", "+00:00")) <= after
    assert stamps == sorted(stamps)


def test_now_follows_the_clock_across_seconds() -> None:
    first = now()
    time.sleep(1.05)
    second = now()
    assert second[:19] != first[:19] and second > first


def test_new_id_is_a_uuid7_in_creation_order() -> None:
    ids = []
    for _ in range(3):
        ids.append(new_id())
        time.sleep(0.002)
    for i in ids:
        assert str(uuid.UUID(i)) == i and uuid.UUID(i).version == 7 and uuid.UUID(i).variant == uuid.RFC_4122
    assert ids == sorted(ids) and len(set(ids)) == 3

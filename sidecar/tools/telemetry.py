"""The client context a Python tool reads as ``get_context().telemetry`` (seed 004's payload):
every field always present, null when the UI did not give it; the time and time zone fall back
to the sidecar's own clock and zone, which is the user's machine."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

import msgspec

from ..api.tool_calls import ClientContext

FIELDS = ("time", "timezone", "locale", "language", "lat", "lon", "city", "country")


def telemetry(given: ClientContext | None) -> dict[str, Any]:
    fields = msgspec.structs.asdict(given) if given is not None else {}
    out = {name: fields.get(name) for name in FIELDS}
    if out["time"] is None:
        out["time"] = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    if out["timezone"] is None:
        out["timezone"] = local_timezone()
    return out


@cache
def local_timezone() -> str | None:
    """The IANA name of this machine's zone (TZ, else where /etc/localtime points), or None."""
    tz = os.environ.get("TZ", "").removeprefix(":")
    if tz and "/" in tz and not tz.startswith("/"):
        return tz
    try:
        target = str(Path("/etc/localtime").resolve(strict=True))
    except OSError:
        return None
    _, sep, name = target.partition("/zoneinfo/")
    return name or None if sep else None

"""Cron expressions as a schedule takes them: standard five fields (minute hour day month weekday),
seed 004's one-field ``*/30`` (every 30 minutes), and the usual ``@daily``-style names; evaluated
in the schedule's IANA time zone.

Parsing and evaluation are cronsim's (the healthchecks.io parser: maintained, small, pure Python,
DST-aware through zoneinfo, and it refuses day-of-month values no chosen month has).

It sits below the services, not in ``schedules/``: toolset.yaml's cron triggers are checked with it
when a toolset is read (``toolsets/manifest.py``), and toolsets sit below schedules.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import tzlocal
from cronsim import CronSim, CronSimError

FIELDS = "minute hour day-of-month month day-of-week"
_NAMED = {"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *", "@weekly": "0 0 * * 0",
          "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *"}
_MINUTE_STEPS = (1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30)  # the steps that repeat evenly through an hour


class CronError(ValueError):
    """An expression a schedule cannot use; the message says what to write instead."""


def normalise(expr: str) -> str:
    """The five-field form of ``expr``, checked: it parses and fires at least once more.
    Raises ``CronError`` naming the problem and the fix."""
    text = " ".join(expr.split())
    if not text:
        raise CronError(f"empty; write five fields ({FIELDS}), e.g. '*/30 * * * *'")
    if text.lower() in _NAMED:
        return _NAMED[text.lower()]
    if text.startswith("@"):
        raise CronError(f"{text!r} is not a name cron knows; use one of {', '.join(_NAMED)} or five fields")
    fields = text.split(" ")
    if len(fields) == 1:
        text = _one_field(text)
    elif len(fields) == 6:
        raise CronError("six fields look like seconds-precision cron; a schedule fires at most once a minute: "
                        f"write five fields ({FIELDS}), e.g. '* * * * *' for every minute")
    elif len(fields) != 5:
        raise CronError(f"{len(fields)} fields; write five ({FIELDS}), e.g. '0 9 * * 1-5' for 09:00 on weekdays")
    try:
        sim = CronSim(text, datetime.now(UTC))
        next(sim)
    except CronSimError as exc:
        reason = str(exc)
        if "day-of-month" in reason:
            reason += " (no month in the expression has that day: it would never fire)"
        raise CronError(f"{text!r}: {reason}; the fields are {FIELDS}") from None
    except (StopIteration, ValueError, OverflowError) as exc:
        raise CronError(f"{text!r} never fires: {exc or 'no matching time'}") from None
    return text


def _one_field(text: str) -> str:
    """Seed 004's shorthand: ``*/N`` alone means every N minutes."""
    if text.startswith("*/") and text[2:].isdigit():
        step = int(text[2:])
        if step == 60:
            return "0 * * * *"
        if step in _MINUTE_STEPS:
            return f"*/{step} * * * *"
        raise CronError(f"every {step} minutes does not divide an hour evenly, so cron cannot say it; use one of "
                        f"{', '.join(f'*/{s}' for s in _MINUTE_STEPS)}, '*/60', or five fields ({FIELDS})")
    raise CronError(f"one field is only for the '*/N' shorthand (every N minutes); write five fields ({FIELDS})")


@lru_cache(maxsize=1024)
def explain(expr: str) -> str:
    """In words: 'At 09:00 on Monday through Friday' (~0.15 ms: kept per expression)."""
    try:
        return CronSim(expr, datetime.now(UTC)).explain()
    except Exception:  # explain() is prose only: an expression it cannot word still runs
        return expr


def next_after(expr: str, after: datetime, zone: str) -> datetime:
    """The first time strictly after ``after`` that ``expr`` matches in ``zone``, in UTC."""
    local = after.astimezone(tz(zone))
    return next(CronSim(expr, local)).astimezone(UTC)


@lru_cache(maxsize=256)
def tz(name: str) -> ZoneInfo:
    return ZoneInfo(name)


def check_zone(name: str) -> str:
    """``name`` if it is an IANA zone this machine knows; else ``CronError``."""
    if not name or name.startswith(("/", ".")) or ".." in name or "\0" in name:
        raise CronError(f"{name!r} is not an IANA time zone name such as 'Europe/Malta' or 'UTC'")
    try:
        tz(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise CronError(f"{name!r} is not an IANA time zone this machine knows, such as 'Europe/Malta' "
                        "or 'UTC'") from None
    return name


@lru_cache(maxsize=1)
def local_zone() -> str:
    """The machine's zone as an IANA name (what a schedule uses unless told): TZ, else tzlocal's
    reading of the system (the /etc/localtime link, the Windows registry), else UTC."""
    name = os.environ.get("TZ", "").removeprefix(":")
    if name and not Path(name).is_absolute():
        try:
            return check_zone(name)
        except CronError:
            pass
    try:  # tzlocal reads the OS's setting on Linux, macOS and Windows alike
        found = tzlocal.get_localzone_name()
        if found:
            return check_zone(found)
    except Exception:  # an odd system setting: the schedule still runs, in UTC
        pass
    return "UTC"

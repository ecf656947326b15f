"""Cron expressions a schedule takes, and the ones it refuses with what to write instead."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from sidecar import cron


@pytest.mark.parametrize(("given", "stored"), [
    ("*/30", "*/30 * * * *"),  # seed 004's shorthand: every 30 minutes
    ("*/60", "0 * * * *"),
    ("  0   9 * *  1-5 ", "0 9 * * 1-5"),
    ("@daily", "0 0 * * *"),
    ("0 9 * * MON-FRI", "0 9 * * MON-FRI"),
    ("0 0 29 2 *", "0 0 29 2 *"),  # leap days do come
])
def test_accepted_forms_are_stored_as_five_fields(given: str, stored: str):
    assert cron.normalise(given) == stored


@pytest.mark.parametrize(("given", "says"), [
    ("30 2 31 2 *", "never fire"),
    ("0 0 31 4,6 *", "never fire"),
    ("* * * * * *", "at most once a minute"),
    ("*/5 * * * * *", "six fields"),
    ("*/45", "does not divide an hour"),
    ("15", "'*/N' shorthand"),
    ("61 * * * *", "Bad minute"),
    ("* * *", "3 fields"),
    ("", "empty"),
    ("@sometimes", "not a name cron knows"),
])
def test_refused_forms_say_what_to_write(given: str, says: str):
    with pytest.raises(cron.CronError, match=says):
        cron.normalise(given)


def test_next_time_is_read_in_the_schedule_zone_across_a_dst_change():
    # Europe/Malta moves to summer time at 02:00 on 29 March 2026: 09:00 local is 08:00 UTC
    # before and 07:00 UTC after.
    before = cron.next_after("0 9 * * *", datetime(2026, 3, 27, 12, 0, tzinfo=UTC), "Europe/Malta")
    after = cron.next_after("0 9 * * *", before, "Europe/Malta")
    assert (before.isoformat(), after.isoformat()) == ("2026-03-28T08:00:00+00:00", "2026-03-29T07:00:00+00:00")


def test_next_time_is_strictly_after():
    at = datetime(2026, 1, 1, 10, 30, tzinfo=UTC)
    assert cron.next_after("*/30 * * * *", at, "UTC") == datetime(2026, 1, 1, 11, 0, tzinfo=UTC)


@pytest.mark.parametrize("zone", ["Mars/Olympus", "../../etc/passwd", "/etc/localtime", ""])
def test_unknown_zones_are_refused(zone: str):
    with pytest.raises(cron.CronError, match="IANA"):
        cron.check_zone(zone)


def test_the_local_zone_is_an_iana_name():
    assert cron.check_zone(cron.local_zone()) == cron.local_zone()

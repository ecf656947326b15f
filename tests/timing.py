"""How long the tests wait for something that should happen. A test waits on an event (a
notification, a line, a process's exit); where it also needs a deadline, so that a hang fails
instead of stopping the suite, the deadline is ``scaled(seconds)``: seconds on a quiet machine,
times ``TEST_TIME_SCALE`` (default 1), read once here. Under coverage, or beside another suite on
the same cores, everything takes longer: ``TEST_TIME_SCALE=3 scripts/test``. Deadlines only: a
test that measures speed (ping latency, a call's cost) judges what it measures, not these."""

from __future__ import annotations

import os


def _scale() -> float:
    text = os.environ.get("TEST_TIME_SCALE", "").strip() or "1"
    try:
        scale = float(text)
    except ValueError:
        raise SystemExit(f"TEST_TIME_SCALE must be a number (seconds are multiplied by it), not {text!r}") from None
    if not scale > 0:
        raise SystemExit(f"TEST_TIME_SCALE must be above 0, not {text!r}")
    return scale


SCALE = _scale()


def scaled(seconds: float) -> float:
    """A deadline of ``seconds`` on a quiet machine, scaled for this run."""
    return seconds * SCALE

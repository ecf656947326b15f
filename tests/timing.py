"""How long the tests wait for something that should happen. A test waits on an event (a
notification, a line, a process's exit); where it also needs a deadline, so that a hang fails
instead of stopping the suite, the deadline is ``scaled(seconds)``: seconds on a quiet machine,
times ``TEST_TIME_SCALE`` (default 1), read once here. Under coverage, or beside another suite on
the same cores, everything takes longer: ``TEST_TIME_SCALE=3 scripts/test``. Deadlines only: a
test that judges speed (a ping's answer while tools misbehave) holds the sidecar to its own bound,
``speed_bound(seconds)``, which moves only for coverage's tracing."""

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


# scripts/coverage traces every line the spawned sidecar runs (coverage passes its settings on in
# this variable); measured on test_lifecycle, the traced sidecar is about 2.5 times slower.
TRACED = bool(os.environ.get("COVERAGE_PROCESS_CONFIG") or os.environ.get("COVERAGE_PROCESS_START"))
TRACE_SLOWDOWN = 3.0


def speed_bound(seconds: float) -> float:
    """A bound on how fast the sidecar answers, as it ships; wider while coverage traces it. A loop
    held up by a blocking call still fails it traced (those stalls run to hundreds of ms)."""
    return seconds * TRACE_SLOWDOWN if TRACED else seconds

"""A server's log messages on their way to the UI: the rate limit, the level, the masking and cut."""

from __future__ import annotations

from sidecar.mcp_host.logs import BURST, MAX_DATA_CHARS, LogGate, at_least, bounded


def test_a_flood_passes_a_burst_then_the_rate_and_the_next_message_counts_the_dropped():
    now = [0.0]
    gate = LogGate(rate=10, burst=BURST, clock=lambda: now[0])
    passed = [gate.admit() for _ in range(1000)]
    assert passed[:BURST] == [0] * BURST and passed[BURST:] == [None] * (1000 - BURST)
    now[0] = 0.5  # five messages' worth of time
    assert [gate.admit() for _ in range(6)] == [1000 - BURST, 0, 0, 0, 0, None]


def test_levels_below_the_servers_are_not_wanted():
    assert at_least("error", "warning") and at_least("warning", "warning")
    assert not at_least("info", "warning")
    assert at_least("debug", None)  # no level set: all the server sends


def test_data_is_masked_and_cut():
    assert bounded({"token": "ghp_" + "a" * 36})["token"] != "ghp_" + "a" * 36
    long = bounded("x" * (MAX_DATA_CHARS * 2))
    assert len(long) < MAX_DATA_CHARS + 50 and long.endswith(f"[{MAX_DATA_CHARS * 2} characters in all]")
    assert isinstance(bounded({"rows": list(range(10_000))}), str)

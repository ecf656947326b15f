"""The SDK's ToolContext: settings and telemetry as a tool reads them (seed 004)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from sidecar.tools.providers.python.workers import SDK_DIR

if str(SDK_DIR) not in sys.path:
    sys.path.insert(0, str(SDK_DIR))

from covalt_toolset import ToolContext  # noqa: E402 (after the sys.path set-up above)


def test_telemetry_always_has_every_field_and_neither_mapping_can_be_changed():
    settings = {"api_key": "k", "days": 3}
    ctx = ToolContext(workspace=Path("/w"), chat_id=None, toolset_id="t", toolset_dir=Path("/t"),
                      settings=settings, telemetry={"city": "Valletta"})
    assert dict(ctx.settings) == {"api_key": "k", "days": 3}
    assert dict(ctx.telemetry) == {"time": None, "timezone": None, "locale": None, "language": None,
                                   "lat": None, "lon": None, "city": "Valletta", "country": None}
    with pytest.raises(TypeError):
        ctx.settings["days"] = 4  # type: ignore[index] - read-only on purpose: that is what is tested
    settings["days"] = 9  # the caller's dict is copied, not shared
    assert ctx.settings["days"] == 3


def test_a_context_built_without_them_reads_empty_settings_and_null_telemetry():
    ctx = ToolContext(workspace=Path("/w"), chat_id=None, toolset_id="t", toolset_dir=Path("/t"))
    assert dict(ctx.settings) == {} and set(ctx.telemetry) >= {"time", "city"} and ctx.telemetry["time"] is None

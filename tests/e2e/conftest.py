from __future__ import annotations

import pytest

from sidecar.sandbox.detect import detect


@pytest.fixture(params=["bubblewrap", "landlock"])
def mechanism(request: pytest.FixtureRequest) -> str:
    """Each OS sandbox that can run here, by name (the tests that need it skip where it cannot)."""
    found = detect(request.param)
    if found.mechanism != request.param:
        pytest.skip(f"{request.param} cannot run here: {found.warning}")
    if request.param == "landlock" and found.landlock_abi < 6:
        pytest.skip(f"Landlock ABI {found.landlock_abi} cannot scope signals (needs 6)")
    return request.param

from __future__ import annotations

import pytest

from sidecar.sandbox.detect import detect


@pytest.fixture
def bwrap() -> str:
    found = detect("bubblewrap")
    if found.mechanism != "bubblewrap" or found.bwrap is None:
        pytest.skip(f"bubblewrap cannot run here: {found.warning}")
    return found.bwrap

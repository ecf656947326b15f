from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from sidecar.sandbox.detect import detect


@pytest.fixture
def bwrap() -> str:
    found = detect("bubblewrap")
    if found.mechanism != "bubblewrap" or found.bwrap is None:
        pytest.skip(f"bubblewrap cannot run here: {found.warning}")
    return found.bwrap


@pytest.fixture
def outer_dir() -> Iterator[Path]:
    """A folder outside /tmp: the sandbox has its own /tmp, where a stray write would only vanish,
    so the data directory of these tests lives where a user's does, beside nothing the tool sees."""
    folder = Path(tempfile.mkdtemp(prefix="covalt-confine-", dir="/var/tmp"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)

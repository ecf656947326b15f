from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from sidecar.client import SidecarClient


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
async def sidecar(data_dir: Path) -> AsyncIterator[SidecarClient]:
    """A real `python -m sidecar` process, initialized, shut down cleanly afterwards."""
    async with SidecarClient.spawn(data_dir, args=("--log-level", "debug")) as client:
        yield client
    assert client.proc.returncode == 0, client.stderr_text()

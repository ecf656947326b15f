from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from sidecar.client import SidecarClient
from tests import timing
from tests.http_server import HttpServer

# pytester runs inner sessions (tests/test_report_fallback.py); report_fallback reports a failure
# pytest cannot format instead of ending the session on an INTERNALERROR.
pytest_plugins = ("pytester", "tests.report_fallback")

# No test reaches the desktop's own keystore: without a session bus, keyring finds no keystore and
# the sidecars the tests start keep their secrets in the 0600 file. The tests of the keystore itself
# bring their own bus (tests/keystore.py) and point their sidecars at it.
os.environ["DBUS_SESSION_BUS_ADDRESS"] = "unix:path=/nonexistent/covalt-tests-no-session-bus"

# Every deadline a test client waits with (a request's answer, a notification, an exit) scales
# with TEST_TIME_SCALE, as the suite's own deadlines do (tests/timing.py).
SidecarClient.deadline_scale = timing.SCALE


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


@pytest.fixture
async def app(data_dir: Path) -> AsyncIterator[SidecarClient]:
    """The same app served in this event loop over an in-memory pipe: unit speed, same wire. Its
    secrets go to the file backend: no keystore is probed (tests/keystore.py brings a real one)."""
    async with SidecarClient.in_process(data_dir, secrets_backend="file") as client:
        yield client
    assert client.proc.returncode == 0


@pytest.fixture
def http_server() -> Iterator[HttpServer]:
    """A real HTTP/1.1 server on 127.0.0.1 whose routes each test scripts (tests/http_server.py)."""
    with HttpServer() as server:
        yield server


@pytest.fixture
def outer_dir() -> Iterator[Path]:
    """A folder outside /tmp: the sandbox has its own /tmp, where a stray write would only vanish,
    so the data directory of these tests lives where a user's does, beside nothing the tool sees."""
    folder = Path(tempfile.mkdtemp(prefix="covalt-confine-", dir="/var/tmp"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)

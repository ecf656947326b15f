from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from sidecar.chat.providers.remote import Endpoint, RemoteProvider
from tests.providers.server import StreamServer
from tests.providers.support import Build


@pytest.fixture
def server() -> Iterator[StreamServer]:
    srv = StreamServer().start()
    yield srv
    srv.stop()


@pytest.fixture
async def built() -> AsyncIterator[Build]:
    """Builds providers and closes their HTTP clients after the test."""
    made: list[RemoteProvider] = []

    def build(cls: type[RemoteProvider], endpoint: Endpoint) -> RemoteProvider:
        made.append(cls(endpoint))
        return made[-1]

    yield build
    for provider in made:
        await provider.aclose()

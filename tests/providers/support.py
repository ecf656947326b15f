"""What the provider tests share: a key to leak-check, a tool, and running a stream to its end."""

from __future__ import annotations

from collections.abc import Callable

from sidecar.chat.providers.base import ProviderEvent, TextDelta, ToolSpec, TurnRequest
from sidecar.chat.providers.remote import Endpoint, RemoteProvider
from sidecar.errors import ProviderError

KEY = "sk-test-4f9c2b7e1d3a8c6f5e0b9a7d"
WEATHER = ToolSpec("get_weather", "The weather in a city",
                   {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})

Build = Callable[[type[RemoteProvider], Endpoint], RemoteProvider]


async def run(provider: object, request: TurnRequest) -> tuple[list[ProviderEvent], ProviderError | None]:
    """Every event the stream yields, and the ProviderError that ended it, if one did."""
    got: list[ProviderEvent] = []
    try:
        async for event in provider.stream(request):  # type: ignore[attr-defined]
            got.append(event)
    except ProviderError as exc:
        return got, exc
    return got, None


def text_of(got: list[ProviderEvent]) -> str:
    return "".join(e.text for e in got if isinstance(e, TextDelta))

"""Both SDK-backed providers against a local server replaying their APIs' recorded streams: text,
parallel tool calls, usage, retries, failures mid-stream, refused keys and cancellation."""

from __future__ import annotations

import socket
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

import anyio
import pytest

from sidecar.chat.providers.anthropic import AnthropicProvider
from sidecar.chat.providers.base import (
    ChatMessage,
    Finished,
    TextDelta,
    ToolCallReady,
    TurnRequest,
    Usage,
)
from sidecar.chat.providers.openai_compat import OpenAIProvider
from sidecar.chat.providers.remote import Endpoint, RemoteProvider
from tests.providers.server import Reply, StreamServer, events
from tests.providers.support import KEY, WEATHER, Build, run, text_of

pytestmark = pytest.mark.anyio

TEXT = "Hello there! It is sunny in Paris."
FAST_RETRY = {"retry-after": "0", "retry-after-ms": "10"}  # -ms: the SDKs' own finer header, keeps tests fast


@dataclass(frozen=True)
class Api:
    kind: str
    provider: type[RemoteProvider]
    base_path: str  # what the provider's baseUrl adds to the server's address
    path: str  # where the SDK posts
    cut_at: int  # the event before which a cut leaves "Hello there!" delivered
    error_event: str  # how the API reports a failure inside a stream
    model: str
    usage: tuple[int, int]
    tool_usage: tuple[int, int]
    tool_ids: tuple[str, str]

    def error(self, type_: str, message: str) -> dict[str, Any]:
        body: dict[str, Any] = {"error": {"type": type_, "message": message}}
        return body | {"type": "error"} if self.kind == "anthropic" else body


APIS = [
    Api("openai", OpenAIProvider, "/v1", "/v1/chat/completions", 4,
        'data: {"error":{"message":"The server had an error while processing your request.","type":"server_error"}}\n\n',
        "gpt-4.1-mini-2025-04-14", (57, 12), (88, 51),
        ("call_Dn2RJJSxzDm49vlVTehseJ0k", "call_Qx8yT3mVbN7kLp2Rz5Wc1HdA")),
    Api("anthropic", AnthropicProvider, "", "/v1/messages", 6,
        'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n',
        "claude-sonnet-4-5-20250929", (25, 12), (472, 89),
        ("toolu_01T1x1fJ34qAmk2tNTrN7Up6", "toolu_01Qx8yT3mVbN7kLp2Rz5WcHd")),
]

@pytest.fixture(params=APIS, ids=lambda a: a.kind)
def api(request: pytest.FixtureRequest) -> Api:
    return request.param


def provider_for(api: Api, server: StreamServer, built: Build, **overrides: Any) -> RemoteProvider:
    settings: dict[str, Any] = {"base_url": server.url + api.base_path, "api_key": KEY, "default_model": "test-model",
                                "max_retries": 2, "headers": {"X-Test": "yes"}} | overrides
    return built(api.provider, Endpoint("test", **settings))


def ask(text: str = "What's the weather in Paris?", **extra: Any) -> TurnRequest:
    return TurnRequest(model=None, messages=[ChatMessage("user", text)], tools=[WEATHER], **extra)


def sent_key(headers: dict[str, str]) -> str:
    """The key as the SDK sent it: ``x-api-key``, or a bearer token (as the anthropic SDK does too now)."""
    return headers.get("x-api-key") or headers.get("authorization", "").removeprefix("Bearer ")


def stream_name(api: Api, which: str) -> str:
    return f"{api.kind}_{which}.sse"


async def test_text_arrives_as_deltas_then_usage_and_stop(api: Api, server: StreamServer, built: Build):
    server.queue(Reply(events=events(stream_name(api, "text"))))
    got, error = await run(provider_for(api, server, built), ask())
    assert error is None
    assert text_of(got) == TEXT and sum(isinstance(e, TextDelta) for e in got) == 9
    assert [e for e in got if isinstance(e, Usage)] == [Usage(*api.usage)]
    assert got[-1] == Finished("end_turn", api.model)

    [seen] = server.requests
    assert seen.path == api.path
    assert sent_key(seen.headers) == KEY and seen.headers["x-test"] == "yes"
    assert seen.body["model"] == "test-model" and seen.body["stream"] is True


async def test_parallel_tool_calls_arrive_whole(api: Api, server: StreamServer, built: Build):
    server.queue(Reply(events=events(stream_name(api, "tool_calls"))))
    got, error = await run(provider_for(api, server, built), ask("Weather in Paris and Berlin?"))
    assert error is None
    calls = [e.call for e in got if isinstance(e, ToolCallReady)]
    assert [(c.id, c.name, c.arguments) for c in calls] == [
        (api.tool_ids[0], "get_weather", {"city": "Paris", "unit": "c"}),
        (api.tool_ids[1], "get_weather", {"city": "Berlin", "days": [1, 2], "unit": "f"}),
    ]
    assert calls[1].raw_arguments == '{"city": "Berlin", "days": [1, 2], "unit": "f"}'
    assert [e for e in got if isinstance(e, Usage)] == [Usage(*api.tool_usage)]
    assert got[-1] == Finished("tool_use", api.model)


async def test_a_rate_limit_is_retried_after_the_servers_delay(api: Api, server: StreamServer, built: Build):
    server.queue(Reply(429, body=api.error("rate_limit_error", "Rate limit reached"), headers=FAST_RETRY),
                 Reply(events=events(stream_name(api, "text"))))
    got, error = await run(provider_for(api, server, built), ask())
    assert error is None and text_of(got) == TEXT
    assert len(server.requests) == 2


async def test_a_server_error_on_every_attempt_fails_with_its_status(api: Api, server: StreamServer, built: Build):
    failure = Reply(500, body=api.error("api_error", "Internal server error"), headers=FAST_RETRY)
    server.queue(failure, failure)
    got, error = await run(provider_for(api, server, built, max_retries=1), ask())
    assert got == [] and error is not None
    assert error.status == 500 and error.retryable and "Internal server error" in error.message
    assert len(server.requests) == 2  # the first try and one retry


async def test_a_stream_cut_midway_keeps_the_text_before_the_cut(api: Api, server: StreamServer, built: Build):
    server.queue(Reply(events=events(stream_name(api, "text")), cut_after=api.cut_at))
    got, error = await run(provider_for(api, server, built), ask())
    assert text_of(got) == "Hello there!"
    assert error is not None and error.retryable and "cut" in error.message
    assert not any(isinstance(e, Finished) for e in got)


async def test_an_error_event_midway_keeps_the_text_before_it(api: Api, server: StreamServer, built: Build):
    server.queue(Reply(events=[*events(stream_name(api, "text"))[:api.cut_at], api.error_event]))
    got, error = await run(provider_for(api, server, built), ask())
    assert text_of(got) == "Hello there!"
    assert error is not None and error.retryable and error.status is None
    assert error.message.startswith("the provider failed mid-answer: ")
    assert ("server_error" if api.kind == "openai" else "overloaded_error: Overloaded") in error.message


async def test_a_stream_that_ends_early_is_a_failure_not_an_answer(api: Api, server: StreamServer, built: Build):
    server.queue(Reply(events=events(stream_name(api, "text"))[:api.cut_at]))  # ends cleanly, but too soon
    got, error = await run(provider_for(api, server, built), ask())
    assert text_of(got) == "Hello there!"
    assert error is not None and "ended before the model finished" in error.message


async def test_a_refused_key_says_so_and_never_shows_the_key(api: Api, server: StreamServer, built: Build):
    server.queue(Reply(401, body=api.error("authentication_error", f"Incorrect API key provided: {KEY}")))
    got, error = await run(provider_for(api, server, built), ask())
    assert error is not None and error.status == 401 and not error.retryable
    assert "API key was refused" in error.message and "providers/set" in error.message
    assert KEY not in error.message and KEY not in str(error)
    assert error.__cause__ is None and error.__suppress_context__
    assert len(server.requests) == 1


async def test_a_server_echoing_the_key_is_scrubbed(api: Api, server: StreamServer, built: Build):
    server.queue(Reply(400, body=api.error("invalid_request_error", f"bad request from {KEY} to X-Test")))
    _, error = await run(provider_for(api, server, built), ask())
    assert error is not None and error.status == 400
    assert KEY not in error.message and "bad request from **** to X-Test" in error.message


async def test_cancelling_the_iteration_closes_the_http_stream(api: Api, server: StreamServer, built: Build):
    server.queue(Reply(events=events(stream_name(api, "text")), hang_after=api.cut_at))
    async with aclosing(provider_for(api, server, built).stream(ask())) as stream:
        async for event in stream:
            if isinstance(event, TextDelta):
                break
    assert server.client_left.wait(5), "the server never saw the client close the stream"


async def test_cancelling_the_turn_mid_stream_closes_the_http_stream(api: Api, server: StreamServer, built: Build):
    server.queue(Reply(events=events(stream_name(api, "text")), hang_after=api.cut_at))
    got = []
    with anyio.CancelScope() as scope:
        async for event in provider_for(api, server, built).stream(ask()):
            got.append(event)
            if isinstance(event, TextDelta):
                scope.cancel()  # lands while the provider waits for the next chunk
    # What was already received may still come out before the cancellation lands; nothing after it.
    assert scope.cancelled_caught and text_of(got) in ("Hello", "Hello there", "Hello there!")
    assert server.client_left.wait(5), "the server never saw the client close the stream"


async def test_an_unreachable_server_says_where_it_looked(api: Api, built: Build):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    provider = built(api.provider, Endpoint("test", f"http://127.0.0.1:{port}", KEY, "m", max_retries=0))
    _, error = await run(provider, ask())
    assert error is not None and error.retryable and f"cannot reach http://127.0.0.1:{port}" in error.message


async def test_settings_missing_before_any_request(api: Api, server: StreamServer, built: Build):
    missing = provider_for(api, server, built, api_key="${COVALT_TEST_NO_SUCH_KEY}")
    _, error = await run(missing, ask())
    assert error is not None and "COVALT_TEST_NO_SUCH_KEY is not set: store it as a secret" in error.message

    # Variables come from the lookup the provider is given (the secret store, then the environment).
    server.queue(Reply(events=events(stream_name(api, "text"))))
    from_env = provider_for(api, server, built, api_key="${COVALT_TEST_KEY}", variables={"COVALT_TEST_KEY": KEY})
    got, error = await run(from_env, ask())
    assert error is None and text_of(got) == TEXT
    assert sent_key(server.requests[0].headers) == KEY

    no_model = provider_for(api, server, built, default_model=None)
    _, error = await run(no_model, ask())
    assert error is not None and "defaultModel" in error.message
    assert len(server.requests) == 1

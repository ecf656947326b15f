"""OpenAI's chat completions API, and every server that speaks it (a base URL away: vLLM, Ollama,
LM Studio, OpenRouter, ...), streamed through the official ``openai`` SDK."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from ...errors import ProviderError
from .base import (
    NO_AUDIO,
    NO_VISION,
    ChatMessage,
    Finished,
    ProviderEvent,
    StopReason,
    TextDelta,
    ToolCallReady,
    ToolLimits,
    ToolSpec,
    TurnRequest,
    Usage,
)
from .remote import Endpoint, RemoteProvider, ToolCallBuffer

_STOP_REASONS: dict[str, StopReason] = {
    "stop": "end_turn", "tool_calls": "tool_use", "function_call": "tool_use", "length": "max_tokens",
    "content_filter": "refusal",
}


class OpenAIProvider(RemoteProvider):
    kind = "openai"
    sdk_name = "openai"
    env_key = "OPENAI_API_KEY"
    # OpenAI documents 128 tools per request. Its tool_search lives in the Responses API only
    # (config api "responses", openai_responses.py): there it is on unless toolSearch is false.
    default_limits = ToolLimits(128_000, 128, None)

    def __init__(self, endpoint: Endpoint) -> None:
        super().__init__(endpoint)
        # Chat completions has no tool search, whatever the config says.
        hosted = endpoint.api == "responses" and endpoint.tool_search is not False
        self.tool_limits = replace(self.tool_limits, tool_search="hosted" if hosted else None)

    def _new_client(self, options: dict[str, Any]) -> Any:
        from openai import AsyncOpenAI

        return AsyncOpenAI(**options)

    async def _open(self, client: Any, model: str, request: TurnRequest) -> Any:
        if self.endpoint.api == "responses":
            from . import openai_responses

            return await client.responses.create(**openai_responses.request_body(request, model))
        vision = self.endpoint.vision
        # The official API's models take images; a compatible server's may not unless it is said so.
        images = vision if vision is not None else self.endpoint.base_url is None
        body = request_body(request, model, images=images, audio=self.endpoint.audio)
        return await client.chat.completions.create(**body)

    def _parser(self) -> Any:
        if self.endpoint.api == "responses":
            from . import openai_responses

            return openai_responses.EventParser()
        return ChunkParser()


def request_body(request: TurnRequest, model: str, *, images: bool = True, audio: bool = False) -> dict[str, Any]:
    """``images``, ``audio``: the model takes images, audio (a tool result's pictures and sound
    follow the results as a user message)."""
    body: dict[str, Any] = {
        "model": model,
        "messages": wire_messages(request, images=images, audio=audio),
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if request.tools:
        body["tools"] = [wire_tool(t) for t in request.tools]
    if request.max_tokens is not None:
        # ``max_tokens`` rather than ``max_completion_tokens``: the one every compatible server knows.
        body["max_tokens"] = request.max_tokens
    return body


def wire_tool(tool: ToolSpec) -> dict[str, Any]:
    return {"type": "function",
            "function": {"name": tool.name, "description": tool.description, "parameters": tool.input_schema}}


def wire_messages(request: TurnRequest, *, images: bool = True, audio: bool = False) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "system", "content": request.system}] if request.system else []
    # A tool message holds text only, and the results of one assistant message must follow it
    # unbroken: their pictures and sound go in one user message after the last of them.
    media: list[dict[str, Any]] = []
    for m in request.messages:
        if m.role != "tool" and media:
            out.append({"role": "user", "content": media})
            media = []
        wired = _wire_message(m)
        given = _media(m, images, audio)
        notes = ([NO_VISION] if m.images and not images else []) + ([NO_AUDIO] if m.audio and not audio else [])
        if notes:
            wired["content"] = "\n".join([m.content, *notes] if m.content else notes)
        if m.role == "tool" and given:
            media += [{"type": "text", "text": f"What the tool call {m.tool_call_id} returned:"}, *given]
        elif m.role == "user" and given:  # a "+" palette or scheduled run: its media beside its text
            wired["content"] = [{"type": "text", "text": wired["content"]}, *given]
        out.append(wired)
    if media:
        out.append({"role": "user", "content": media})
    return out


def _media(m: ChatMessage, images: bool, audio: bool) -> list[dict[str, Any]]:
    """The content parts of a message's pictures and sound the model takes."""
    parts: list[dict[str, Any]] = []
    if images:
        parts += [{"type": "image_url", "image_url": {"url": f"data:{i.mime_type};base64,{i.data}"}}
                  for i in m.images]
    if audio:
        parts += [{"type": "input_audio", "input_audio": {"data": a.data, "format": a.format}} for a in m.audio]
    return parts


def _wire_message(m: ChatMessage) -> dict[str, Any]:
    if m.role == "tool":
        # The API has no error flag for a tool result: the text itself says it failed.
        return {"role": "tool", "tool_call_id": m.tool_call_id or "", "content": m.content}
    if m.role == "assistant" and m.tool_calls:
        return {
            "role": "assistant",
            "content": m.content or None,
            "tool_calls": [
                {"id": c.id, "type": "function",
                 "function": {"name": c.name,
                              "arguments": json.dumps(c.arguments) if c.arguments is not None else c.raw_arguments}}
                for c in m.tool_calls
            ],
        }
    return {"role": m.role, "content": m.content}


class ChunkParser:
    """``chat.completion.chunk``s in, provider events out. Tool calls are held until the choice
    finishes, since their arguments arrive in fragments keyed by the call's index."""

    def __init__(self) -> None:
        self._calls = ToolCallBuffer()
        self._finish_reason: str | None = None
        self._model: str | None = None
        self._called = False

    def feed(self, chunk: Any) -> Iterable[ProviderEvent]:
        self._model = chunk.model or self._model
        for choice in chunk.choices or ():
            if choice.index != 0:  # we ask for one choice; a server that sends more is ignored
                continue
            delta = choice.delta
            if delta is not None:
                text = delta.content or getattr(delta, "refusal", None)
                if text:
                    yield TextDelta(text)
                for call in delta.tool_calls or ():
                    function = call.function
                    self._calls.add(call.index, call.id, function.name if function else None,
                                    function.arguments if function else None)
            if choice.finish_reason:
                self._finish_reason = choice.finish_reason
                for call in self._calls.drain():
                    self._called = True
                    yield ToolCallReady(call)
        if chunk.usage is not None:  # the last chunk (include_usage): no choices, the whole call's usage
            yield Usage(chunk.usage.prompt_tokens, chunk.usage.completion_tokens)

    def finish(self) -> Iterable[ProviderEvent]:
        if self._finish_reason is None:
            raise ProviderError("the answer ended before the model finished: try again", retryable=True)
        reason = _STOP_REASONS.get(self._finish_reason, "other")
        # Some compatible servers say "stop" after tool calls; the calls are what the turn acts on.
        yield Finished("tool_use" if self._called and reason == "end_turn" else reason, self._model)

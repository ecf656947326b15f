"""Anthropic's messages API, streamed through the official ``anthropic`` SDK as raw events."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ...errors import ProviderError
from .base import (
    NO_AUDIO_API,
    NO_VISION,
    ChatMessage,
    Finished,
    NativeBlock,
    ProviderEvent,
    StopReason,
    TextDelta,
    ToolCallReady,
    ToolLimits,
    ToolSpec,
    TurnRequest,
    Usage,
)
from .remote import RemoteProvider, ToolCallBuffer, parse_arguments

# Blocks the API runs itself and streams whole (its tool search): given back in the next call.
_NATIVE_BLOCKS = frozenset({"server_tool_use", "tool_search_tool_result"})

DEFAULT_MAX_TOKENS = 4096  # the API requires a limit; a turn may ask for another

_STOP_REASONS: dict[str, StopReason] = {
    "end_turn": "end_turn", "stop_sequence": "end_turn", "tool_use": "tool_use", "max_tokens": "max_tokens",
    "model_context_window_exceeded": "max_tokens", "refusal": "refusal",
}


class AnthropicProvider(RemoteProvider):
    kind = "anthropic"
    sdk_name = "anthropic"
    env_key = "ANTHROPIC_API_KEY"
    # No documented cap on tools per request; tool search holds up to 10,000 deferred ones.
    default_limits = ToolLimits(200_000, None, "bm25")

    def _new_client(self, options: dict[str, Any]) -> Any:
        from anthropic import AsyncAnthropic

        return AsyncAnthropic(**options)

    async def _open(self, client: Any, model: str, request: TurnRequest) -> Any:
        return await client.messages.create(**request_body(request, model, images=self.endpoint.vision is not False,
                                                           tool_search=self.tool_limits.tool_search))

    def _parser(self) -> EventParser:
        return EventParser()


def request_body(request: TurnRequest, model: str, *, images: bool = True,
                 tool_search: str | None = None) -> dict[str, Any]:
    """``images``: the model takes images (a tool result's pictures go in as image blocks);
    ``tool_search``: the API's tool search variant ("bm25", "regex") that loads deferred tools."""
    system, messages = wire_messages(request, images=images)
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": request.max_tokens or DEFAULT_MAX_TOKENS,
        "messages": messages,
        "stream": True,
    }
    if system:
        body["system"] = system
    if request.tools:
        body["tools"] = [wire_tool(t) for t in request.tools]
        if any(t.deferred for t in request.tools):
            # Deferred tools are found by the API's own search tool, which is never deferred itself.
            variant = tool_search or "bm25"
            body["tools"].append({"type": f"tool_search_tool_{variant}_20251119",
                                  "name": f"tool_search_tool_{variant}"})
    return body


def wire_tool(tool: ToolSpec) -> dict[str, Any]:
    wired = {"name": tool.name, "description": tool.description, "input_schema": tool.input_schema}
    if tool.deferred:
        wired["defer_loading"] = True
    return wired


def wire_messages(request: TurnRequest, *, images: bool = True) -> tuple[str, list[dict[str, Any]]]:
    """(system, messages). System text goes to the top level; a tool result is a ``tool_result``
    block in a user message, and consecutive messages of one role become one message, as the
    API wants every result of an assistant's calls in the single user message after it."""
    system = [request.system] if request.system else []
    out: list[dict[str, Any]] = []
    for m in request.messages:
        if m.role == "system":
            system.append(m.content)
        else:
            _append(out, "assistant" if m.role == "assistant" else "user", _blocks(m, images))
    return "\n\n".join(s for s in system if s), out


def _blocks(m: ChatMessage, images: bool = True) -> list[dict[str, Any]]:
    if m.role == "tool":
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": m.tool_call_id or ""}
        text = _noted(m, images)
        if m.images and images:
            # A tool result's content may hold image blocks beside its text.
            block["content"] = ([{"type": "text", "text": text}] if text else []) + _pictures(m)
        elif text:
            block["content"] = text
        if m.is_error:
            block["is_error"] = True
        return [block]
    text = _noted(m, images)
    # The API's own tool search, as it came: the calls after it were made knowing what it found.
    blocks: list[dict[str, Any]] = list(m.native)
    if text:  # no empty text blocks
        blocks.append({"type": "text", "text": text})
    if images:  # a "+" palette or scheduled run's pictures, after the text that names them
        blocks += _pictures(m)
    blocks += [{"type": "tool_use", "id": c.id, "name": c.name,
                "input": c.arguments if c.arguments is not None else {}} for c in m.tool_calls]
    return blocks


def _pictures(m: ChatMessage) -> list[dict[str, Any]]:
    return [{"type": "image", "source": {"type": "base64", "media_type": i.mime_type, "data": i.data}}
            for i in m.images]


def _noted(m: ChatMessage, images: bool) -> str:
    """The text, with a note for what the model is not given: the API takes no audio at all."""
    notes = ([NO_VISION] if m.images and not images else []) + ([NO_AUDIO_API] if m.audio else [])
    return "\n".join([m.content, *notes] if m.content else notes)


def _append(out: list[dict[str, Any]], role: str, blocks: list[dict[str, Any]]) -> None:
    if not blocks:
        return
    if out and out[-1]["role"] == role:
        out[-1]["content"].extend(blocks)
    else:
        out.append({"role": role, "content": blocks})


class EventParser:
    """Raw message stream events in, provider events out. A tool call is whole at its block's
    ``content_block_stop``; usage is complete only at the end (``message_delta`` carries the output)."""

    def __init__(self) -> None:
        self._calls = ToolCallBuffer()
        self._model: str | None = None
        self._input: int | None = None
        self._output: int | None = None
        self._stop_reason: str | None = None
        self._stopped = False
        self._native: dict[int, dict[str, Any]] = {}  # index -> a server block being streamed
        self._native_input: dict[int, list[str]] = {}

    def feed(self, event: Any) -> Iterable[ProviderEvent]:
        kind = event.type
        if kind == "message_start":
            self._model = event.message.model
            self._usage(event.message.usage)
        elif kind == "content_block_start":
            block = event.content_block
            if block.type == "tool_use":
                self._calls.add(event.index, block.id, block.name)
            elif block.type in _NATIVE_BLOCKS:
                self._native[event.index] = block.model_dump(mode="json", exclude_none=True)
                self._native_input[event.index] = []
            elif block.type == "text" and block.text:
                yield TextDelta(block.text)
        elif kind == "content_block_delta":
            delta = event.delta
            if delta.type == "text_delta" and delta.text:
                yield TextDelta(delta.text)
            elif delta.type == "input_json_delta":
                self._input_json(event.index, delta.partial_json)
        elif kind == "content_block_stop":
            if event.index in self._native:
                yield self._native_block(event.index)
            call = self._calls.pop(event.index)
            if call is not None:
                yield ToolCallReady(call)
        elif kind == "message_delta":
            self._stop_reason = event.delta.stop_reason or self._stop_reason
            self._usage(event.usage)
        elif kind == "message_stop":
            self._stopped = True

    def _input_json(self, index: int, fragment: str) -> None:
        if index in self._native:  # the API's own tool search's query
            self._native_input[index].append(fragment)
        else:
            self._calls.add(index, fragment=fragment)

    def _native_block(self, index: int) -> NativeBlock:
        block = self._native.pop(index)
        text = "".join(self._native_input.pop(index, []))
        if block["type"] == "server_tool_use" and text:
            block["input"] = parse_arguments(text) or {}
        block.pop("caller", None)  # how it was called: the API's to say, not a field to give back
        loaded: tuple[str, ...] = ()
        content = block.get("content")
        if block["type"] == "tool_search_tool_result" and isinstance(content, dict):
            loaded = tuple(str(r.get("tool_name")) for r in content.get("tool_references") or [] if r.get("tool_name"))
        return NativeBlock(block, loaded)

    def _usage(self, usage: Any) -> None:
        if usage is None:
            return
        # Cached prompt tokens are counted apart from input_tokens; all of them were read.
        if getattr(usage, "input_tokens", None) is not None:
            self._input = usage.input_tokens + sum(
                getattr(usage, name, None) or 0 for name in ("cache_creation_input_tokens", "cache_read_input_tokens"))
        if usage.output_tokens is not None:
            self._output = usage.output_tokens  # cumulative: the last one counts

    def finish(self) -> Iterable[ProviderEvent]:
        if not self._stopped:
            raise ProviderError("the answer ended before the model finished: try again", retryable=True)
        yield from (ToolCallReady(c) for c in self._calls.drain())  # a block left open: still a whole call
        if self._input is not None or self._output is not None:
            yield Usage(self._input, self._output)
        yield Finished(_STOP_REASONS.get(self._stop_reason or "", "other"), self._model)

"""OpenAI's Responses API, for what chat completions lacks: the hosted ``tool_search`` that loads
deferred function tools (``defer_loading``) as the model needs them (issue 28). Chosen per provider
with config ``api: "responses"``; streamed through the official ``openai`` SDK as typed events.

Only what a chat turn needs: text in and out, function calls and their outputs, and the search's
own items given back as they came (the request is not stored: ``store`` false). Tool results'
pictures and sound are not sent this way: the text says so.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from ...errors import ProviderError
from .base import (
    NO_AUDIO_API,
    ChatMessage,
    Finished,
    NativeBlock,
    ProviderEvent,
    TextDelta,
    ToolCallReady,
    ToolCallRequest,
    ToolSpec,
    TurnRequest,
    Usage,
)
from .remote import parse_arguments

_NATIVE_ITEMS = frozenset({"tool_search_call", "tool_search_output"})
NO_MEDIA = "[The pictures of this result are not given to you: this provider uses the Responses API without them.]"


def request_body(request: TurnRequest, model: str) -> dict[str, Any]:
    system = [request.system] if request.system else []
    items: list[dict[str, Any]] = []
    for m in request.messages:
        if m.role == "system":
            system.append(m.content)
        else:
            items += _items(m)
    body: dict[str, Any] = {"model": model, "input": items, "stream": True, "store": False}
    if system:
        body["instructions"] = "\n\n".join(s for s in system if s)
    if request.tools:
        body["tools"] = [wire_tool(t) for t in request.tools]
        if any(t.deferred for t in request.tools):
            body["tools"].append({"type": "tool_search"})  # hosted: the API searches the deferred ones
    if request.max_tokens is not None:
        body["max_output_tokens"] = request.max_tokens
    return body


def wire_tool(tool: ToolSpec) -> dict[str, Any]:
    wired: dict[str, Any] = {"type": "function", "name": tool.name, "description": tool.description,
                             "parameters": tool.input_schema}
    if tool.deferred:
        wired["defer_loading"] = True
    return wired


def _items(m: ChatMessage) -> list[dict[str, Any]]:
    notes = ([NO_MEDIA] if m.images else []) + ([NO_AUDIO_API] if m.audio else [])
    text = "\n".join([m.content, *notes] if m.content else notes)
    if m.role == "tool":
        return [{"type": "function_call_output", "call_id": m.tool_call_id or "", "output": text}]
    out: list[dict[str, Any]] = list(m.native)  # the search as it ran: the calls after it knew its finds
    if text:
        out.append({"role": m.role, "content": text})
    out += [{"type": "function_call", "call_id": c.id, "name": c.name,
             "arguments": json.dumps(c.arguments) if c.arguments is not None else c.raw_arguments}
            for c in m.tool_calls]
    return out


class EventParser:
    """Response stream events in, provider events out: a function call is whole at its item's
    ``response.output_item.done``; usage and the model come with ``response.completed``."""

    def __init__(self) -> None:
        self._model: str | None = None
        self._usage: Usage | None = None
        self._called = False
        self._status: str | None = None

    def feed(self, event: Any) -> Iterable[ProviderEvent]:
        kind = event.type
        if kind == "response.output_text.delta" and event.delta:
            yield TextDelta(event.delta)
        elif kind == "response.refusal.delta" and event.delta:
            yield TextDelta(event.delta)
        elif kind == "response.output_item.done":
            yield from self._item(event.item)
        elif kind in ("response.completed", "response.incomplete"):
            self._status = "incomplete" if kind == "response.incomplete" else "completed"
            response = event.response
            self._model = getattr(response, "model", None) or self._model
            usage = getattr(response, "usage", None)
            if usage is not None:
                self._usage = Usage(usage.input_tokens, usage.output_tokens)
        elif kind == "response.failed":
            error = getattr(event.response, "error", None)
            raise ProviderError(f"the model failed: {getattr(error, 'message', None) or 'no reason given'}",
                                retryable=True)
        elif kind == "error":  # an error event in a stream that had begun well
            raise ProviderError(f"the model failed: {getattr(event, 'message', None) or 'no reason given'}",
                                retryable=True)
        elif kind == "response.created":
            self._model = getattr(event.response, "model", None)

    def _item(self, item: Any) -> Iterable[ProviderEvent]:
        if item.type == "function_call":
            self._called = True
            yield ToolCallReady(ToolCallRequest(item.call_id, item.name, parse_arguments(item.arguments or ""),
                                                item.arguments or ""))
        elif item.type in _NATIVE_ITEMS:
            block = item.model_dump(mode="json", exclude_none=True)
            loaded = tuple(str(t.get("name")) for t in block.get("tools") or [] if t.get("name"))
            yield NativeBlock(block, loaded)

    def finish(self) -> Iterable[ProviderEvent]:
        if self._status is None:
            raise ProviderError("the answer ended before the model finished: try again", retryable=True)
        if self._usage is not None:
            yield self._usage
        stop = "max_tokens" if self._status == "incomplete" else "tool_use" if self._called else "end_turn"
        yield Finished(stop, self._model)

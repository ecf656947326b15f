"""What every model provider speaks: a provider-neutral context in, a stream of events out.

A turn hands a provider the branch as ``ChatMessage``s and the tools it may call as ``ToolSpec``s
(already under provider-safe names), and reads ``ProviderEvent``s until ``Finished``. Providers
buffer a tool call's argument fragments themselves and yield the call once it is whole, so the turn
never sees half an argument. A failure is a ``ProviderError``; text yielded before it still counts.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

Role = Literal["system", "user", "assistant", "tool"]
StopReason = Literal["end_turn", "tool_use", "max_tokens", "refusal", "other"]


@dataclass(frozen=True, slots=True)
class ToolSpec:
    name: str  # provider-safe alias, ^[a-zA-Z0-9_-]{1,64}$, unique within the request
    description: str
    input_schema: dict[str, Any]
    tool_id: str = ""  # the canonical id behind the alias (the scripted provider names tools by it)
    # Sent for the provider to load on demand (Anthropic's defer_loading): the model sees it only
    # once its own tool search finds it. Only for a provider whose ``tool_limits.tool_search`` is set.
    deferred: bool = False


@dataclass(frozen=True, slots=True)
class ToolLimits:
    """What bounds the tools one request may carry (issue 28), from the provider's config."""

    context_window: int = 128_000  # tokens the model reads (config contextWindow)
    max_tools: int | None = None  # tools per request at most, deferred ones included (config maxTools)
    tool_search: str | None = None  # the provider's own deferred loading: "bm25" or "regex" (Anthropic)


@dataclass(frozen=True, slots=True)
class ToolCallRequest:
    id: str  # the provider's id for the call, echoed back with its result
    name: str  # the alias the model used (may name a tool it was not given)
    arguments: dict[str, Any] | None  # None when the model's argument text was not a JSON object
    raw_arguments: str = ""  # the text as the model sent it (for the error when it did not parse)


@dataclass(frozen=True, slots=True)
class ImagePart:
    """A picture a tool returned, for a model that takes images: base64 data as the tool gave it."""

    mime_type: str  # image/png, image/jpeg, image/gif or image/webp
    data: str


@dataclass(frozen=True, slots=True)
class AudioPart:
    """Sound a tool returned, for a model that takes audio: base64 data as the tool gave it."""

    format: Literal["wav", "mp3"]  # what OpenAI's input_audio takes
    data: str


NO_VISION = ("[The images of this result are not shown to you: this model is set up without images "
             "(the provider's config.vision).]")
NO_AUDIO = ("[The audio of this result is not given to you: this model is set up without audio "
            "(the provider's config.audio).]")
NO_AUDIO_API = "[The audio of this result is not given to you: this provider's API takes no audio.]"


@dataclass(slots=True)
class ChatMessage:
    role: Role
    content: str = ""
    # assistant: the calls it made; tool: the one call this message answers
    tool_calls: list[ToolCallRequest] = field(default_factory=list)
    tool_call_id: str | None = None
    is_error: bool = False  # tool: the result is an error (Anthropic's is_error)
    # tool, or user after a "+" palette or scheduled run: pictures and sound of the result, given
    # as such to a model that takes them (the content names them)
    images: list[ImagePart] = field(default_factory=list)
    audio: list[AudioPart] = field(default_factory=list)
    # assistant, within one turn: the provider's own blocks (Anthropic's server_tool_use and
    # tool_search_tool_result), given back as they came so the next call sees what its search found
    native: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class TurnRequest:
    model: str | None  # None: the provider's default model
    messages: list[ChatMessage]
    tools: list[ToolSpec]
    system: str | None = None
    max_tokens: int | None = None


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str


@dataclass(frozen=True, slots=True)
class ToolCallReady:
    call: ToolCallRequest


@dataclass(frozen=True, slots=True)
class Usage:
    input_tokens: int | None = None
    output_tokens: int | None = None


@dataclass(frozen=True, slots=True)
class Finished:
    stop_reason: StopReason
    model: str | None = None  # the model that answered, when the provider says


@dataclass(frozen=True, slots=True)
class NativeBlock:
    """A block the provider ran itself (its tool search): kept for the next call of the turn;
    ``loaded`` names the deferred tools it brought in (by the names they were sent under)."""

    block: dict[str, Any]
    loaded: tuple[str, ...] = ()


ProviderEvent = TextDelta | ToolCallReady | Usage | Finished | NativeBlock


class Provider(Protocol):
    id: str
    kind: str
    tool_limits: ToolLimits

    def stream(self, request: TurnRequest) -> AsyncIterator[ProviderEvent]:
        """One model call. Cancelling the iteration closes the underlying stream."""
        ...

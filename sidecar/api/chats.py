"""Chats and their message tree."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from .base import Empty, MethodSpec, Model
from .errors import ErrorCode
from .pages import NextPageToken, PageParams
from .settings import (
    KEEP_BUILTINS,
    PINNED_TOOLS,
    RELEVANT_TOOLS,
    TOOL_BUDGET_COUNT,
    TOOL_BUDGET_TOKENS,
    TOOL_SELECTION,
    NonNegCount,
    NonNegTokens,
    PinnedIds,
    ToolSelectionMode,
    TopK,
)
from .toolsets import ClientContext, ToolCall

_NF, _ST = ErrorCode.NOT_FOUND, ErrorCode.STORAGE_ERROR
_IP, _CF, _UP = ErrorCode.INVALID_PARAMS, ErrorCode.CONFLICT, ErrorCode.UPSTREAM_ERROR


class Chat(Model):
    id: str
    title: str
    created_at: str
    updated_at: str
    # The absolute path of the chat's materialised workspace, for "open in editor".
    workspace_path: str
    active_leaf_id: str | None = None
    active_manifest_id: str | None = None
    tool_settings: Annotated[ChatToolSettings | None, msgspec.Meta(description=(
        "The chat's own tool-selection settings (chats/update); a field left out follows the user's "
        "settings (settings/get). Absent: the chat follows them all."))] = None


_INHERIT = " Absent or null: the user's setting (settings/get)."


class ChatToolSettings(Model):
    """A chat's overrides of the user's tool-selection settings, each as in UserSettings."""

    tool_selection: Annotated[ToolSelectionMode | None, msgspec.Meta(description=TOOL_SELECTION + _INHERIT)] = None
    tool_budget_tokens: Annotated[NonNegTokens | None, msgspec.Meta(description=TOOL_BUDGET_TOKENS + _INHERIT)] = None
    tool_budget_count: Annotated[NonNegCount | None, msgspec.Meta(description=TOOL_BUDGET_COUNT + _INHERIT)] = None
    relevant_tools: Annotated[TopK | None, msgspec.Meta(description=RELEVANT_TOOLS + _INHERIT)] = None
    pinned_tools: Annotated[PinnedIds | None, msgspec.Meta(description=PINNED_TOOLS + _INHERIT)] = None
    keep_builtins: Annotated[bool | None, msgspec.Meta(description=KEEP_BUILTINS + _INHERIT)] = None


class UpdateChatParams(Model):
    id: Annotated[str, msgspec.Meta(description="The chat.")]
    title: Annotated[Annotated[str, msgspec.Meta(max_length=1000)] | msgspec.UnsetType, msgspec.Meta(
        description="A new title (at most 1000 characters). Left out: unchanged.")] = msgspec.UNSET
    tool_settings: Annotated[ChatToolSettings | msgspec.UnsetType, msgspec.Meta(description=(
        "The chat's tool-selection settings, replaced whole: a field left out (or null) follows the user's "
        "settings again; {} makes the chat follow them all. Left out: unchanged. Applies from the next "
        "turn."))] = msgspec.UNSET


class OfferedTools(Model):
    """What one model call of a turn was offered (the toolsOffered event, stored with the message)."""

    tool_ids: Annotated[list[str], msgspec.Meta(description=(
        "The ids of the tools whose definitions the model got in full, in the order sent (find_tools, "
        "not a catalog tool, is not among them)."))]
    deferred: Annotated[int, msgspec.Meta(description=(
        "How many more tools went with the request for the provider to load on demand (Anthropic's tool "
        "search: defer_loading); 0 where the provider has no deferred loading."))]
    reason: Annotated[str, msgspec.Meta(description=(
        "Why these: 'all' (every tool, within the budget or toolSelection all), 'toolsOff' (the kill switch: "
        "none), 'budget' (auto, over the budget: selected), 'relevant' (toolSelection relevant: selected), "
        "'cap' (more tools than the provider takes per request: selected), 'replay' (the tools of the "
        "assistant message named by chat/send toolsFrom), 'found' (find_tools or the provider's tool search "
        "loaded more this turn), 'named' (the model called a tool it had not been offered, which exists "
        "and is enabled: loaded)."))]
    find_tools: Annotated[bool, msgspec.Meta(description=(
        "Whether the model was offered find_tools, the turn's own tool that loads more definitions."))] = False


class Message(Model):
    id: str
    role: Literal["system", "user", "assistant", "tool"]
    content: str
    created_at: str
    status: str
    # Tool calls made while producing this message (a turn's, or one run from the "+" palette).
    tool_calls: list[ToolCall]
    parent_id: str | None = None
    # The workspace after this message; absent means it inherits its parent's.
    manifest_id: str | None = None
    # Assistant messages: who answered and why the turn stopped.
    provider: str | None = None
    model: str | None = None
    stop_reason: str | None = None
    usage: TokenUsage | None = None
    # User messages: the toolsets and MCP servers it brought into the chat (seed 003).
    attachments: list[Attachment] = []
    tools_offered: Annotated[list[OfferedTools], msgspec.Meta(description=(
        "Assistant messages: what each model call of the turn was offered, in order (empty for a "
        "message stored before tool selection existed)."))] = []


class TokenUsage(Model):
    input_tokens: int = 0
    output_tokens: int = 0


class Attachment(Model):
    """Something a user message mentions; its tools join the chat's turns from that message on."""

    kind: Literal["toolset", "mcpServer"]
    id: str  # toolset id, or MCP server key (``toolset~server``) or unambiguous server id


class CreateChatParams(Model):
    title: str = ""


class ChatResult(Model):
    chat: Chat


class ListChatsParams(PageParams, kw_only=True):
    """A page of chats, most recently active first."""


class ChatsResult(Model):
    chats: Annotated[list[Chat], msgspec.Meta(description=(
        "Most recently active first (updatedAt, then id). A chat that becomes active while you page moves "
        "ahead of the pages already read: it is not repeated, and the UI hears of its activity anyway."))]
    next_page_token: NextPageToken = None


class ChatIdParams(Model):
    id: str


class ChatWithMessages(Model):
    chat: Chat
    messages: list[Message]


class SwitchBranchParams(Model):
    chat_id: str
    message_id: str


class AddMessageParams(Model):
    chat_id: str
    role: Literal["system", "user", "assistant"]
    content: str
    # Default: the active leaf. An earlier message starts a new branch (with its files).
    parent_id: str | None = None


class MessageResult(Model):
    message: Message
    chat: Chat


class SendParams(Model):
    chat_id: str
    content: str
    # Absent: the active leaf. An earlier message starts a new branch from it (edit a question:
    # the old question's parent; retry an answer: the question), with that point's files; null
    # starts a new first message (edit the chat's first question).
    parent_id: str | None | msgspec.UnsetType = msgspec.UNSET
    provider: str | None = None  # a providers/list id; default: the default provider
    model: str | None = None  # default: the provider's default model
    attachments: list[Attachment] = []
    # Model calls in this turn at most (each answer with tool calls leads to one more).
    max_turns: int = 10
    system: str | None = None  # a system prompt for this turn
    # The user's time, place and language: what this turn's Python tools read as telemetry.
    client_context: ClientContext | None = None
    tools_from: Annotated[str | None, msgspec.Meta(description=(
        "An assistant message of this chat whose first model call's tools this turn offers again (a "
        "retry or replay on another branch sees what the original saw; tools gone or disabled since "
        "are left out). Absent: chosen anew (the chat's tool settings)."))] = None


StopReason = Literal["endTurn", "maxTurns", "cancelled", "error"]


class SendResult(Model):
    message_id: str  # the assistant message
    user_message_id: str
    stop_reason: StopReason
    error: str | None = None
    usage: TokenUsage | None = None


class MessageStartedEvent(Model, tag="messageStarted", tag_field="kind"):
    user_message_id: str
    provider: str
    parent_id: str | None = None
    model: str | None = None


class TextDeltaEvent(Model, tag="textDelta", tag_field="kind"):
    text: str


class ToolCallStartedEvent(Model, tag="toolCallStarted", tag_field="kind"):
    tool_call: ToolCall
    tool_name: str  # as the UI shows it: the tool's name, ``<source>.<tool>`` for attached ones


class ToolCallFinishedEvent(Model, tag="toolCallFinished", tag_field="kind"):
    tool_call: ToolCall  # with result or error, and the render plan


class MessageCompletedEvent(Model, tag="messageCompleted", tag_field="kind"):
    stop_reason: StopReason
    content: str  # the whole text of the message
    manifest_id: str | None = None
    usage: TokenUsage | None = None


class ToolsOfferedEvent(Model, tag="toolsOffered", tag_field="kind"):
    """Before each model call: the tools it is offered, and why."""

    tool_ids: Annotated[list[str], msgspec.Meta(description="As OfferedTools.toolIds.")]
    deferred: Annotated[int, msgspec.Meta(description="As OfferedTools.deferred.")]
    reason: Annotated[str, msgspec.Meta(description="As OfferedTools.reason.")]
    find_tools: Annotated[bool, msgspec.Meta(description="As OfferedTools.findTools.")] = False
    tokens: Annotated[int, msgspec.Meta(description=(
        "Estimated tokens of the definitions sent in full (4 characters of their JSON a token), "
        "find_tools included."))] = 0


class ErrorEvent(Model, tag="error", tag_field="kind"):
    message: str
    code: int | None = None  # the JSON-RPC error code it maps to (UpstreamError, Timeout, ...)
    retryable: bool = False


ChatEvent = (MessageStartedEvent | TextDeltaEvent | ToolCallStartedEvent | ToolCallFinishedEvent
             | MessageCompletedEvent | ErrorEvent | ToolsOfferedEvent)


class ChatEventParams(Model):
    chat_id: str
    message_id: str
    seq: int  # per message, from 1, without gaps: a gap means a lost notification
    event: ChatEvent


class ConfirmToolCallParams(Model):
    chat_id: str
    tool_call_id: str
    tool_id: str
    tool_name: str
    args: dict[str, Any]
    message_id: str | None = None
    description: str | None = None


class ConfirmToolCallResult(Model):
    decision: Literal["allowOnce", "allowChat", "allowAlways", "deny"]
    args: dict[str, Any] | None = None  # edited arguments, checked against the schema before use


class InvokeToolParams(Model):
    chat_id: str
    tool_id: Annotated[str, msgspec.Meta(description=(
        "The tool's canonical id, or what the \"+\" palette gives: +slug (the current version of the slug) "
        "or +slug@version. A slug that names tools in several toolsets is InvalidParams listing them."))]
    args: dict[str, Any]
    parent_id: str | None | msgspec.UnsetType = msgspec.UNSET  # as in chat/send
    client_context: ClientContext | None = None  # as in chat/send


class InvokeToolResult(Model):
    message: Message
    tool_call: ToolCall
    chat: Chat


SPECS = (
    MethodSpec("chats/create", "clientToServer", "request", "Create an empty chat.",
               params=CreateChatParams, result=ChatResult, errors=(_ST,)),
    MethodSpec("chats/list", "clientToServer", "request",
               "Chats, most recently active first, a page at a time (pageSize, pageToken).",
               params=ListChatsParams, result=ChatsResult, errors=(_IP, _ST)),
    MethodSpec("chats/get", "clientToServer", "request",
               "A chat with every message of every branch (each with parentId and manifestId).",
               params=ChatIdParams, result=ChatWithMessages, errors=(_NF, _ST)),
    MethodSpec("chats/delete", "clientToServer", "request",
               "Delete a chat, its messages, manifests and workspace directory.",
               params=ChatIdParams, result=Empty, errors=(_NF, _ST)),
    MethodSpec("chats/update", "clientToServer", "request",
               "Change a chat's title and/or its tool-selection settings (toolSettings, replaced whole).",
               params=UpdateChatParams, result=ChatResult, errors=(_NF, _IP, _ST)),
    MethodSpec("chats/switchBranch", "clientToServer", "request",
               "Make the branch through messageId active (down to its newest leaf) and "
               "materialise its files; outside edits are first saved to the branch being left.",
               params=SwitchBranchParams, result=ChatResult, errors=(_NF, _CF, _ST)),
    MethodSpec("chats/addMessage", "clientToServer", "request",
               "Append a message (imported history, a note) under parentId or the active leaf; "
               "it becomes the active leaf.",
               params=AddMessageParams, result=MessageResult, errors=(_NF, _CF, _ST)),
    MethodSpec("chat/send", "clientToServer", "request",
               "Run a chat turn: the user message joins the branch, the model's reply streams as "
               "chat/event notifications, its tool calls run in the chat's workspace (asking "
               "ui/confirmToolCall where a tool requires it) until the model stops or maxTurns. "
               "$/cancelRequest ends it with stopReason cancelled; what was produced is kept.",
               params=SendParams, result=SendResult, errors=(_NF, _IP, _CF, _ST), cancel="signal",
               seed_endpoints=("stream",)),
    MethodSpec("chat/event", "serverToClient", "notification",
               "One step of a running turn, for the assistant message messageId, in seq order.",
               params=ChatEventParams),
    MethodSpec("ui/confirmToolCall", "serverToClient", "request",
               "Ask the user whether a tool may run (allowChat: for this chat; allowAlways: until "
               "the tool's definition changes); args may come back edited.",
               params=ConfirmToolCallParams, result=ConfirmToolCallResult),
    MethodSpec("chat/invokeTool", "clientToServer", "request",
               "Run one tool in a chat without a model (the \"+\" palette): it becomes a message in "
               "the branch with its tool call and render plan. A tool whose required config is "
               "missing is Conflict (reason \"not configured\") before anything joins the branch.",
               params=InvokeToolParams, result=InvokeToolResult, errors=(_NF, _IP, _CF, _ST)),
)

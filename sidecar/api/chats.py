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
from .tool_calls import ClientContext, ToolCall

_NF, _ST = ErrorCode.NOT_FOUND, ErrorCode.STORAGE_ERROR
_IP, _CF, _UP = ErrorCode.INVALID_PARAMS, ErrorCode.CONFLICT, ErrorCode.UPSTREAM_ERROR


_UTC = "ISO 8601 UTC ('2026-01-02T03:04:05.678901Z')"
_CHAT = "The chat (NotFound if unknown)."


class Chat(Model):
    id: Annotated[str, msgspec.Meta(description="The chat's id (a UUIDv7).")]
    title: Annotated[str, msgspec.Meta(
        description="The title as chats/create or chats/update set it; empty when none was given (the sidecar "
                    "never makes one up).")]
    created_at: Annotated[str, msgspec.Meta(description="When it was created, " + _UTC + ".")]
    updated_at: Annotated[str, msgspec.Meta(
        description="Its last activity (a message added, a branch switch, a new workspace version), " + _UTC
                    + "; what chats/list orders by. Title and settings changes do not move it.")]
    # For "open in editor".
    workspace_path: Annotated[str, msgspec.Meta(
        description="The absolute path of the folder holding the active branch's files.")]
    active_leaf_id: Annotated[str | None, msgspec.Meta(
        description="The message at the end of the active branch; absent while the chat has no message.")] = None
    active_manifest_id: Annotated[str | None, msgspec.Meta(
        description="The workspace version the folder holds now; absent while it never held a file.")] = None
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
    id: Annotated[str, msgspec.Meta(description="The message's id (a UUIDv7: ids sort by creation).")]
    role: Annotated[Literal["system", "user", "assistant", "tool"], msgspec.Meta(
        description="'user', 'assistant' (a model's reply), 'system' (only from chats/addMessage) or 'tool' (a "
                    "run from the \"+\" palette, chat/invokeTool).")]
    content: Annotated[str, msgspec.Meta(
        description="The text: an assistant's whole reply text (so far, while streaming); a tool message's "
                    "'Ran <tool name>: done' or '...: failed'.")]
    created_at: Annotated[str, msgspec.Meta(description="When it was added, " + _UTC + ".")]
    status: Annotated[str, msgspec.Meta(
        description="'complete', 'streaming' (a turn or palette run is still writing it), 'cancelled' or 'error'. "
                    "A message a previous sidecar left streaming becomes 'error' at the next start.")]
    tool_calls: Annotated[list[ToolCall], msgspec.Meta(
        description="The tool calls made while producing it (a turn's, in order, or the palette run's one); "
                    "empty for user and system messages.")]
    parent_id: Annotated[str | None, msgspec.Meta(
        description="The message it follows in its branch; absent: a first message.")] = None
    manifest_id: Annotated[str | None, msgspec.Meta(
        description="The workspace version after this message, when its files differ from its parent's (a tool "
                    "call or an outside edit changed them); absent: the same as the nearest ancestor's.")] = None
    provider: Annotated[str | None, msgspec.Meta(
        description="Assistant messages: the provider that answered (a providers/list id).")] = None
    model: Annotated[str | None, msgspec.Meta(
        description="Assistant messages: the model chat/send named, else the one the provider reported using; "
                    "absent when neither is known.")] = None
    stop_reason: Annotated[str | None, msgspec.Meta(
        description="Assistant messages once finished: why the turn stopped, as SendResult.stopReason "
                    "('endTurn', 'maxTurns', 'cancelled', 'error'; 'error' too for a turn cut off by a crash). "
                    "Absent while streaming and on other messages.")] = None
    usage: Annotated[TokenUsage | None, msgspec.Meta(
        description="Assistant messages: tokens of the turn's model calls together, as the provider reported "
                    "them ({} when it reported none). Absent on other messages.")] = None
    # Seed 003.
    attachments: Annotated[list[Attachment], msgspec.Meta(
        description="User messages: the toolsets and MCP servers it brought into the chat (their tools join "
                    "the turns of its branch from here on), by canonical id.")] = []
    tools_offered: Annotated[list[OfferedTools], msgspec.Meta(description=(
        "Assistant messages: what each model call of the turn was offered, in order (empty for a "
        "message stored before tool selection existed)."))] = []


class TokenUsage(Model):
    input_tokens: Annotated[int, msgspec.Meta(
        description="Input (prompt) tokens, summed over the model calls; absent: 0.")] = 0
    output_tokens: Annotated[int, msgspec.Meta(
        description="Output (completion) tokens, summed over the model calls; absent: 0.")] = 0


class Attachment(Model):
    """Something a user message mentions; its tools join the chat's turns from that message on."""

    kind: Annotated[Literal["toolset", "mcpServer"], msgspec.Meta(
        description="'toolset' (the tools of a toolset, even while the toolset is disabled; a tool the "
                    "user switched off stays off) or 'mcpServer' (the enabled tools of one MCP server).")]
    id: Annotated[str, msgspec.Meta(
        description="A toolset id, or an MCP server's key (toolset~server) or unambiguous server id; stored "
                    "messages give the canonical form (toolset id, server key). NotFound if it names nothing, "
                    "Conflict if its toolset is deleted.")]


class CreateChatParams(Model):
    title: Annotated[str, msgspec.Meta(description="The chat's title; default empty.")] = ""


class ChatResult(Model):
    chat: Annotated[Chat, msgspec.Meta(description="The chat as it is now.")]


class ListChatsParams(PageParams, kw_only=True):
    """A page of chats, most recently active first."""


class ChatsResult(Model):
    chats: Annotated[list[Chat], msgspec.Meta(description=(
        "Most recently active first (updatedAt, then id). A chat that becomes active while you page moves "
        "ahead of the pages already read: it is not repeated, and the UI hears of its activity anyway."))]
    next_page_token: NextPageToken = None


class ChatIdParams(Model):
    id: Annotated[str, msgspec.Meta(
        description=_CHAT + " chats/delete is Conflict while a turn or palette run is under way in it.")]


class ChatWithMessages(Model):
    chat: Annotated[Chat, msgspec.Meta(description="The chat.")]
    messages: Annotated[list[Message], msgspec.Meta(
        description="Every message of every branch, oldest first; parentId links them into a tree.")]


class SwitchBranchParams(Model):
    chat_id: Annotated[str, msgspec.Meta(
        description=_CHAT + " Conflict while a turn or palette run is under way in it.")]
    message_id: Annotated[str, msgspec.Meta(
        description="Any message of the branch to make active (NotFound if not the chat's); the chat moves to "
                    "the newest leaf below it.")]


class AddMessageParams(Model):
    chat_id: Annotated[str, msgspec.Meta(
        description=_CHAT + " Conflict while a turn or palette run is under way in it.")]
    role: Annotated[Literal["system", "user", "assistant"], msgspec.Meta(
        description="'system', 'user' or 'assistant'.")]
    content: Annotated[str, msgspec.Meta(description="The message's text.")]
    parent_id: Annotated[str | None, msgspec.Meta(
        description="The message to add it under (NotFound if not the chat's); an earlier one starts a new "
                    "branch, with that point's files. Absent or null: the active leaf (unlike chat/send, null "
                    "does not start a new first message).")] = None


class MessageResult(Model):
    message: Annotated[Message, msgspec.Meta(description="The message added, status 'complete'.")]
    chat: Annotated[Chat, msgspec.Meta(description="The chat after it: the message is its active leaf.")]


class SendParams(Model):
    chat_id: Annotated[str, msgspec.Meta(
        description=_CHAT + " Conflict while another turn or palette run is under way in it.")]
    content: Annotated[str, msgspec.Meta(description="The user message's text.")]
    parent_id: Annotated[str | None | msgspec.UnsetType, msgspec.Meta(
        description="Where the user message goes (NotFound if not the chat's). Absent: under the active leaf. "
                    "An earlier message starts a new branch from it, with that point's files (edit a question: "
                    "the old question's parent; retry an answer: the question); null starts a new first message "
                    "(edit the chat's first question).")] = msgspec.UNSET
    provider: Annotated[str | None, msgspec.Meta(
        description="A providers/list id (NotFound if unknown); absent: the default provider.")] = None
    model: Annotated[str | None, msgspec.Meta(
        description="The model to ask; absent: the provider's defaultModel (the turn ends with an error if it "
                    "has none).")] = None
    attachments: Annotated[list[Attachment], msgspec.Meta(
        description="Toolsets and MCP servers this message brings into the chat: their tools join this turn "
                    "and the later ones of its branch (see Attachment.kind).")] = []
    max_turns: Annotated[int, msgspec.Meta(
        description="Model calls in this turn at most, 1-100 (InvalidParams otherwise), default 10: each answer "
                    "with tool calls leads to one more; past it the turn stops with maxTurns.")] = 10
    system: Annotated[str | None, msgspec.Meta(
        description="A system prompt for this turn only (not stored); absent: none.")] = None
    client_context: Annotated[ClientContext | None, msgspec.Meta(
        description="The user's time, place and language: what this turn's Python tools read as telemetry. "
                    "Absent: as if every field were left out (see ClientContext).")] = None
    tools_from: Annotated[str | None, msgspec.Meta(description=(
        "An assistant message of this chat whose first model call's tools this turn offers again (a "
        "retry or replay on another branch sees what the original saw; tools gone or disabled since "
        "are left out). Absent: chosen anew (the chat's tool settings)."))] = None


StopReason = Literal["endTurn", "maxTurns", "cancelled", "error"]


_STOP = ("Why the turn stopped: 'endTurn' (the model answered without tool calls), 'maxTurns' (maxTurns model "
         "calls made), 'cancelled' ($/cancelRequest; what was produced is kept) or 'error' (see error).")
_USAGE = "Tokens of the turn's model calls together; absent when the provider reported none."


class SendResult(Model):
    message_id: Annotated[str, msgspec.Meta(description="The assistant message the turn wrote.")]
    user_message_id: Annotated[str, msgspec.Meta(description="The user message the turn added.")]
    stop_reason: Annotated[StopReason, msgspec.Meta(description=_STOP)]
    error: Annotated[str | None, msgspec.Meta(
        description="With stopReason error: what went wrong, for the user (secrets scrubbed); absent "
                    "otherwise.")] = None
    usage: Annotated[TokenUsage | None, msgspec.Meta(description=_USAGE)] = None


class MessageStartedEvent(Model, tag="messageStarted", tag_field="kind"):
    user_message_id: Annotated[str, msgspec.Meta(description="The user message the turn added.")]
    provider: Annotated[str, msgspec.Meta(description="The provider answering (its providers/list id).")]
    parent_id: Annotated[str | None, msgspec.Meta(
        description="The user message's parent; absent: it is a first message.")] = None
    model: Annotated[str | None, msgspec.Meta(
        description="The model chat/send named; absent when it named none (the provider's defaultModel is "
                    "asked; the stored Message.model says which once the provider reports it).")] = None


class TextDeltaEvent(Model, tag="textDelta", tag_field="kind"):
    text: Annotated[str, msgspec.Meta(
        description="More of the reply's text, to append; pieces are gathered for about 30 ms or 2 KB per "
                    "event, and always sent before the event that follows them.")]


class ToolCallStartedEvent(Model, tag="toolCallStarted", tag_field="kind"):
    tool_call: Annotated[ToolCall, msgspec.Meta(
        description="The call as it starts (status running). A call refused before it ran (unknown tool, bad "
                    "arguments, denied, tools switched off) comes started and finished back to back, already "
                    "with status error.")]
    tool_name: Annotated[str, msgspec.Meta(
        description="The name to show: the tool's name, '<source>.<tool>' for a tool an attachment brought, or "
                    "the name the model used for a tool that does not exist.")]


class ToolCallFinishedEvent(Model, tag="toolCallFinished", tag_field="kind"):
    tool_call: Annotated[ToolCall, msgspec.Meta(
        description="The call as it ended: with its result or error, and its render plan.")]


class MessageCompletedEvent(Model, tag="messageCompleted", tag_field="kind"):
    stop_reason: Annotated[StopReason, msgspec.Meta(description=_STOP)]
    content: Annotated[str, msgspec.Meta(description="The whole text of the message (every textDelta joined).")]
    manifest_id: Annotated[str | None, msgspec.Meta(
        description="The workspace version the turn's tool calls left; absent when they changed no file.")] = None
    usage: Annotated[TokenUsage | None, msgspec.Meta(description=_USAGE)] = None


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
    message: Annotated[str, msgspec.Meta(
        description="What ended the turn, for the user (secrets scrubbed); messageCompleted (stopReason error) "
                    "follows.")]
    code: Annotated[int | None, msgspec.Meta(
        description="The JSON-RPC error code it maps to: UpstreamError for the provider's failures, else the "
                    "error's own (InternalError for a bug). Always sent today.")] = None
    retryable: Annotated[bool, msgspec.Meta(
        description="Whether trying again may work (a provider's timeout, rate limit, overload or cut "
                    "connection); false for every other error.")] = False


ChatEvent = (MessageStartedEvent | TextDeltaEvent | ToolCallStartedEvent | ToolCallFinishedEvent
             | MessageCompletedEvent | ErrorEvent | ToolsOfferedEvent)


class ChatEventParams(Model):
    chat_id: Annotated[str, msgspec.Meta(description="The chat of the turn.")]
    message_id: Annotated[str, msgspec.Meta(
        description="The assistant message the turn writes (SendResult.messageId).")]
    seq: Annotated[int, msgspec.Meta(
        description="The event's number within the message: from 1, without gaps (a gap means a lost "
                    "notification).")]
    event: Annotated[ChatEvent, msgspec.Meta(
        description="What happened, told apart by kind: messageStarted first, messageCompleted last.")]


class ConfirmToolCallParams(Model):
    chat_id: Annotated[str, msgspec.Meta(description="The chat whose turn wants to run the tool.")]
    tool_call_id: Annotated[str, msgspec.Meta(
        description="The id the call will have (ToolCall.id), also when it is refused.")]
    tool_id: Annotated[str, msgspec.Meta(description="The tool's canonical id.")]
    tool_name: Annotated[str, msgspec.Meta(description="The name to show, as ToolCallStartedEvent.toolName.")]
    args: Annotated[dict[str, Any], msgspec.Meta(
        description="The arguments the model gave, already checked against the tool's input schema.")]
    message_id: Annotated[str | None, msgspec.Meta(
        description="The assistant message of the turn (always given by chat turns).")] = None
    description: Annotated[str | None, msgspec.Meta(
        description="The tool's description, to help the user decide.")] = None


class ConfirmToolCallResult(Model):
    decision: Annotated[Literal["allowOnce", "allowChat", "allowAlways", "deny"], msgspec.Meta(
        description="'allowOnce' (this call), 'allowChat' (this tool in this chat from now on), 'allowAlways' "
                    "(this tool everywhere until its definition changes) or 'deny' (the call fails with "
                    "errorKind denied and the model is told). An error answer counts as deny.")]
    args: Annotated[dict[str, Any] | None, msgspec.Meta(
        description="Edited arguments to run with instead; checked against the input schema (the call fails "
                    "with errorKind arguments if they do not fit). Absent or null: the model's.")] = None


class InvokeToolParams(Model):
    chat_id: Annotated[str, msgspec.Meta(
        description=_CHAT + " Conflict while a turn or another palette run is under way in it.")]
    tool_id: Annotated[str, msgspec.Meta(description=(
        "The tool's canonical id, or what the \"+\" palette gives: +slug (the current version of the slug) "
        "or +slug@version. A slug that names tools in several toolsets is InvalidParams listing them."))]
    args: Annotated[dict[str, Any], msgspec.Meta(
        description="The tool's arguments, checked against its input schema (InvalidParams naming the field).")]
    parent_id: Annotated[str | None | msgspec.UnsetType, msgspec.Meta(
        description="Where the tool message goes, as chat/send parentId: absent, the active leaf; null, a new "
                    "first message.")] = msgspec.UNSET
    client_context: Annotated[ClientContext | None, msgspec.Meta(
        description="As chat/send clientContext.")] = None


class InvokeToolResult(Model):
    message: Annotated[Message, msgspec.Meta(
        description="The new 'tool' message (the active leaf), with this call in toolCalls.")]
    tool_call: Annotated[ToolCall, msgspec.Meta(
        description="The call as it ended, with its result or error and render plan.")]
    chat: Annotated[Chat, msgspec.Meta(description="The chat after the run.")]


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
               params=ChatIdParams, result=Empty, errors=(_NF, ErrorCode.CONFLICT, _ST)),
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

from __future__ import annotations

import json

import msgspec

from ..api.base import Empty
from ..api.chats import (
    AddMessageParams,
    Attachment,
    Chat,
    ChatEventParams,
    ChatIdParams,
    ChatResult,
    ChatsResult,
    ChatToolSettings,
    ChatWithMessages,
    ConfirmToolCallParams,
    ConfirmToolCallResult,
    CreateChatParams,
    InvokeToolParams,
    InvokeToolResult,
    ListChatsParams,
    Message,
    MessageResult,
    OfferedTools,
    SendParams,
    SendResult,
    SwitchBranchParams,
    TokenUsage,
    UpdateChatParams,
)
from ..chat.chats import ChatService
from ..chat.turns import TurnService, call_out
from ..rpc import RequestContext
from ..store.chats import ChatRow, MessageRow
from ..store.tool_calls import ToolCallRepo, ToolCallRow
from ..workspace.service import WorkspaceService
from .routes import method


class _StoredParts(msgspec.Struct):
    """What a message's stored ``parts`` tell the UI: a user message's attachments, kept as the
    wire gave them (chat/turns.py writes them); the other keys (steps, views, ran) stay inside."""

    attachments: list[Attachment] = []


_decode_parts = msgspec.json.Decoder(_StoredParts).decode
_decode_offered = msgspec.json.Decoder(list[OfferedTools]).decode
_decode_settings = msgspec.json.Decoder(ChatToolSettings).decode


class _StoredOffer(msgspec.Struct, rename="camel"):
    """A stored offer keeps more (deferredIds, loaded) than the wire shows."""

    tool_ids: list[str] = []
    deferred: int = 0
    reason: str = "all"
    find_tools: bool = False


_decode_stored_offers = msgspec.json.Decoder(list[_StoredOffer]).decode


def _offered(stored: str | None) -> list[OfferedTools]:
    if not stored:
        return []
    try:
        return [OfferedTools(o.tool_ids, o.deferred, o.reason, o.find_tools) for o in _decode_stored_offers(stored)]
    except msgspec.DecodeError:  # written by a later version, say: the message still shows
        return []


def _tool_settings(stored: str | None) -> ChatToolSettings | None:
    if not stored or stored == "{}":
        return None
    try:
        return _decode_settings(stored)
    except msgspec.DecodeError:
        return None


class ChatHandlers:
    def __init__(self, chats: ChatService, turns: TurnService, workspace: WorkspaceService,
                 tool_calls: ToolCallRepo) -> None:
        self.chats = chats
        self.turns = turns
        self.workspace = workspace
        self.tool_calls = tool_calls

    def chat_out(self, row: ChatRow) -> Chat:
        return Chat(
            id=row.id, title=row.title, created_at=row.created_at, updated_at=row.updated_at,
            workspace_path=str(self.workspace.workspace_path(row.id)),
            active_leaf_id=row.active_leaf_message_id, active_manifest_id=row.active_manifest_id,
            tool_settings=_tool_settings(row.settings),
        )

    @staticmethod
    def message_out(m: MessageRow, calls: list[ToolCallRow] | None = None) -> Message:
        parts = _decode_parts(m.parts) if m.parts else _StoredParts()
        usage = json.loads(m.usage) if m.usage else None
        return Message(id=m.id, role=m.role, content=m.content, created_at=m.created_at,
                       status=m.status, tool_calls=[call_out(c) for c in calls or []], parent_id=m.parent_id,
                       manifest_id=m.manifest_id, provider=m.provider, model=m.model, stop_reason=m.stop_reason,
                       usage=TokenUsage(usage.get("inputTokens", 0), usage.get("outputTokens", 0)) if usage else None,
                       attachments=parts.attachments, tools_offered=_offered(m.tools_offered))

    @method("chats/create")
    async def create(self, p: CreateChatParams, ctx: RequestContext) -> ChatResult:
        return ChatResult(self.chat_out(await self.chats.create(p.title)))

    @method("chats/list")
    async def list_chats(self, p: ListChatsParams, ctx: RequestContext) -> ChatsResult:
        rows, token = await self.chats.page(p)
        return ChatsResult([self.chat_out(c) for c in rows], token)

    @method("chats/get")
    async def get(self, p: ChatIdParams, ctx: RequestContext) -> ChatWithMessages:
        chat, messages = await self.chats.get(p.id)
        by_message: dict[str | None, list[ToolCallRow]] = {}
        for call in await self.tool_calls.for_chat(p.id):
            by_message.setdefault(call.message_id, []).append(call)
        return ChatWithMessages(self.chat_out(chat), [self.message_out(m, by_message.get(m.id, [])) for m in messages])

    @method("chats/delete")
    async def delete(self, p: ChatIdParams, ctx: RequestContext) -> Empty:
        await self.chats.delete(p.id)
        return Empty()

    @method("chats/update")
    async def update(self, p: UpdateChatParams, ctx: RequestContext) -> ChatResult:
        await self.chats.require(p.id)
        title = p.title if isinstance(p.title, str) else None
        settings = (msgspec.to_builtins(p.tool_settings) if isinstance(p.tool_settings, ChatToolSettings) else None)
        await self.chats.repo.update_chat(p.id, title=title, tool_settings=settings)
        return ChatResult(self.chat_out(await self.chats.require(p.id)))

    @method("chats/switchBranch")
    async def switch_branch(self, p: SwitchBranchParams, ctx: RequestContext) -> ChatResult:
        return ChatResult(self.chat_out(await self.chats.switch_branch(p.chat_id, p.message_id)))

    @method("chats/addMessage")
    async def add_message(self, p: AddMessageParams, ctx: RequestContext) -> MessageResult:
        msg = await self.chats.add_message(p.chat_id, p.role, p.content, p.parent_id)
        return MessageResult(self.message_out(msg), self.chat_out(await self.workspace.require_chat(p.chat_id)))

    @method("chat/send")
    async def send(self, p: SendParams, ctx: RequestContext) -> SendResult:
        async def emit(params: ChatEventParams) -> None:
            await ctx.notify("chat/event", params)

        async def confirm(params: ConfirmToolCallParams) -> ConfirmToolCallResult:
            return await ctx.request("ui/confirmToolCall", params, ConfirmToolCallResult)

        return await self.turns.send(p, emit, confirm, ctx.wait_cancel_requested)

    @method("chat/invokeTool")
    async def invoke_tool(self, p: InvokeToolParams, ctx: RequestContext) -> InvokeToolResult:
        msg, call = await self.turns.invoke(p.chat_id, p.tool_id, p.args, p.parent_id, p.client_context)
        return InvokeToolResult(self.message_out(msg, [call]), call_out(call),
                                self.chat_out(await self.workspace.require_chat(p.chat_id)))


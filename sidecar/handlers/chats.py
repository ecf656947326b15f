from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ..api.base import Empty
from ..api.chats import (
    AddMessageParams,
    Attachment,
    ConfirmToolCallParams,
    ConfirmToolCallResult,
    ChatEventParams,
    InvokeToolParams,
    InvokeToolResult,
    SendParams,
    SendResult,
    TokenUsage,
    Chat,
    ChatIdParams,
    ChatResult,
    ChatsResult,
    ChatWithMessages,
    CreateChatParams,
    Message,
    MessageResult,
    SwitchBranchParams,
)
from ..rpc import RequestContext
from ..store.chats import ChatRow, MessageRow
from ..store.tool_calls import ToolCallRow

if TYPE_CHECKING:
    from ..app import Sidecar


def handlers(app: Sidecar) -> dict[str, Any]:
    def chat_out(row: ChatRow) -> Chat:
        return Chat(
            id=row.id, title=row.title, created_at=row.created_at, updated_at=row.updated_at,
            workspace_path=str(app.workspace.workspace_path(row.id)),
            active_leaf_id=row.active_leaf_message_id, active_manifest_id=row.active_manifest_id,
        )

    def message_out(m: MessageRow, calls: list[ToolCallRow] | None = None) -> Message:
        from ..chat.turns import call_out

        parts = json.loads(m.parts) if m.parts else {}
        usage = json.loads(m.usage) if m.usage else None
        return Message(id=m.id, role=m.role, content=m.content, created_at=m.created_at,  # type: ignore[arg-type]
                       status=m.status, tool_calls=[call_out(c) for c in calls or []], parent_id=m.parent_id,
                       manifest_id=m.manifest_id, provider=m.provider, model=m.model, stop_reason=m.stop_reason,
                       usage=TokenUsage(usage.get("inputTokens", 0), usage.get("outputTokens", 0)) if usage else None,
                       attachments=[Attachment(a["kind"], a["id"]) for a in parts.get("attachments") or []])

    async def create(p: CreateChatParams, ctx: RequestContext) -> ChatResult:
        return ChatResult(chat_out(await app.chats.create(p.title)))

    async def list_(p: None, ctx: RequestContext) -> ChatsResult:
        return ChatsResult([chat_out(c) for c in await app.chats.list()])

    async def get(p: ChatIdParams, ctx: RequestContext) -> ChatWithMessages:
        chat, messages = await app.chats.get(p.id)
        by_message: dict[str | None, list[ToolCallRow]] = {}
        for call in await app.tool_calls.repo.for_chat(p.id):
            by_message.setdefault(call.message_id, []).append(call)
        return ChatWithMessages(chat_out(chat), [message_out(m, by_message.get(m.id, [])) for m in messages])

    async def delete(p: ChatIdParams, ctx: RequestContext) -> Empty:
        await app.chats.delete(p.id)
        return Empty()

    async def switch_branch(p: SwitchBranchParams, ctx: RequestContext) -> ChatResult:
        return ChatResult(chat_out(await app.chats.switch_branch(p.chat_id, p.message_id)))

    async def add_message(p: AddMessageParams, ctx: RequestContext) -> MessageResult:
        msg = await app.chats.add_message(p.chat_id, p.role, p.content, p.parent_id)
        return MessageResult(message_out(msg), chat_out(await app.workspace.require_chat(p.chat_id)))

    async def send(p: SendParams, ctx: RequestContext) -> SendResult:
        async def emit(params: ChatEventParams) -> None:
            await ctx.notify("chat/event", params)

        async def confirm(params: ConfirmToolCallParams) -> ConfirmToolCallResult:
            return await ctx.request("ui/confirmToolCall", params, ConfirmToolCallResult)  # type: ignore[no-any-return]

        return await app.turns.send(p, emit, confirm, ctx.wait_cancel_requested)

    async def invoke_tool(p: InvokeToolParams, ctx: RequestContext) -> InvokeToolResult:
        from ..chat.turns import call_out

        msg, call = await app.turns.invoke(p.chat_id, p.tool_id, p.args, p.parent_id)
        return InvokeToolResult(message_out(msg, [call]), call_out(call),
                                chat_out(await app.workspace.require_chat(p.chat_id)))

    return {"chat/send": send, "chat/invokeTool": invoke_tool, "chats/create": create, "chats/list": list_, "chats/get": get,
            "chats/delete": delete, "chats/switchBranch": switch_branch,
            "chats/addMessage": add_message}

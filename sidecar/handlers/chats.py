from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..api.base import Empty
from ..api.chats import (
    AddMessageParams,
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

if TYPE_CHECKING:
    from ..app import Sidecar


def handlers(app: Sidecar) -> dict[str, Any]:
    def chat_out(row: ChatRow) -> Chat:
        return Chat(
            id=row.id, title=row.title, created_at=row.created_at, updated_at=row.updated_at,
            workspace_path=str(app.workspace.workspace_path(row.id)),
            active_leaf_id=row.active_leaf_message_id, active_manifest_id=row.active_manifest_id,
        )

    def message_out(m: MessageRow) -> Message:
        return Message(id=m.id, role=m.role, content=m.content, created_at=m.created_at,  # type: ignore[arg-type]
                       status=m.status, tool_calls=[], parent_id=m.parent_id,
                       manifest_id=m.manifest_id)

    async def create(p: CreateChatParams, ctx: RequestContext) -> ChatResult:
        return ChatResult(chat_out(await app.chats.create(p.title)))

    async def list_(p: None, ctx: RequestContext) -> ChatsResult:
        return ChatsResult([chat_out(c) for c in await app.chats.list()])

    async def get(p: ChatIdParams, ctx: RequestContext) -> ChatWithMessages:
        chat, messages = await app.chats.get(p.id)
        return ChatWithMessages(chat_out(chat), [message_out(m) for m in messages])

    async def delete(p: ChatIdParams, ctx: RequestContext) -> Empty:
        await app.chats.delete(p.id)
        return Empty()

    async def switch_branch(p: SwitchBranchParams, ctx: RequestContext) -> ChatResult:
        return ChatResult(chat_out(await app.chats.switch_branch(p.chat_id, p.message_id)))

    async def add_message(p: AddMessageParams, ctx: RequestContext) -> MessageResult:
        msg = await app.chats.add_message(p.chat_id, p.role, p.content, p.parent_id)
        return MessageResult(message_out(msg), chat_out(await app.workspace.require_chat(p.chat_id)))

    return {"chats/create": create, "chats/list": list_, "chats/get": get,
            "chats/delete": delete, "chats/switchBranch": switch_branch,
            "chats/addMessage": add_message}

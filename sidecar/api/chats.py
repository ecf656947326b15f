"""Chats and their message tree."""

from __future__ import annotations

from typing import Any, Literal

from .base import Empty, MethodSpec, Model
from .errors import ErrorCode

_NF, _ST = ErrorCode.NOT_FOUND, ErrorCode.STORAGE_ERROR


class Chat(Model):
    id: str
    title: str
    created_at: str
    updated_at: str
    # The absolute path of the chat's materialised workspace, for "open in editor".
    workspace_path: str
    active_leaf_id: str | None = None
    active_manifest_id: str | None = None


class Message(Model):
    id: str
    role: Literal["system", "user", "assistant", "tool"]
    content: str
    created_at: str
    status: str
    # Tool calls made while producing this message (filled by chat turns).
    tool_calls: list[dict[str, Any]]
    parent_id: str | None = None
    # The workspace after this message; absent means it inherits its parent's.
    manifest_id: str | None = None


class CreateChatParams(Model):
    title: str = ""


class ChatResult(Model):
    chat: Chat


class ChatsResult(Model):
    chats: list[Chat]


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


SPECS = (
    MethodSpec("chats/create", "clientToServer", "request", "Create an empty chat.",
               params=CreateChatParams, result=ChatResult, errors=(_ST,)),
    MethodSpec("chats/list", "clientToServer", "request", "All chats, most recently active first.",
               result=ChatsResult, errors=(_ST,)),
    MethodSpec("chats/get", "clientToServer", "request",
               "A chat with every message of every branch (each with parentId and manifestId).",
               params=ChatIdParams, result=ChatWithMessages, errors=(_NF, _ST)),
    MethodSpec("chats/delete", "clientToServer", "request",
               "Delete a chat, its messages, manifests and workspace directory.",
               params=ChatIdParams, result=Empty, errors=(_NF, _ST)),
    MethodSpec("chats/switchBranch", "clientToServer", "request",
               "Make the branch through messageId active (down to its newest leaf) and "
               "materialise its files; outside edits are first saved to the branch being left.",
               params=SwitchBranchParams, result=ChatResult, errors=(_NF, _ST)),
    MethodSpec("chats/addMessage", "clientToServer", "request",
               "Append a message (imported history, a note) under parentId or the active leaf; "
               "it becomes the active leaf.",
               params=AddMessageParams, result=MessageResult, errors=(_NF, _ST)),
)

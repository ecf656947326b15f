"""The chat service: chats, their message tree, and moving between branches.

A message records the manifest of the workspace after it; a message without one inherits its
nearest ancestor's. Moving to a branch materialises that manifest, so a branch's files come back
with its messages.
"""

from __future__ import annotations

import msgspec

from ..api.chats import ListChatsParams
from ..errors import Conflict, NotFound
from ..paging import Pages
from ..store.chats import ChatRow, MessageRow, Role
from ..store.rows import new_id, now
from ..workspace.service import WorkspaceService


def effective_manifest(by_id: dict[str, MessageRow], message_id: str | None) -> str | None:
    seen: set[str] = set()
    while message_id is not None and message_id not in seen:
        seen.add(message_id)
        msg = by_id.get(message_id)
        if msg is None:
            return None
        if msg.manifest_id:
            return msg.manifest_id
        message_id = msg.parent_id
    return None


def latest_leaf(messages: list[MessageRow], message_id: str) -> str:
    """Follow the newest child down from ``message_id`` (how a branch picker shows a branch)."""
    newest: dict[str, MessageRow] = {}
    for m in messages:  # ordered by creation: later children replace earlier ones
        if m.parent_id is not None:
            newest[m.parent_id] = m
    while message_id in newest:
        message_id = newest[message_id].id
    return message_id


class ChatService:
    def __init__(self, workspace: WorkspaceService) -> None:
        self.workspace = workspace
        self.repo = workspace.chats
        self.turning: set[str] = set()  # chats with a turn or a direct tool run in progress

    def claim(self, chat_id: str) -> None:
        """One turn per chat; its tree and files are not to move under it meanwhile."""
        if chat_id in self.turning:
            raise Conflict("turn running", f"chat {chat_id} has a turn in progress; wait for it or cancel it")
        self.turning.add(chat_id)

    def release(self, chat_id: str) -> None:
        self.turning.discard(chat_id)

    def _check_idle(self, chat_id: str) -> None:
        if chat_id in self.turning:
            raise Conflict("turn running", f"chat {chat_id} has a turn in progress; wait for it or cancel it")

    async def create(self, title: str) -> ChatRow:
        return await self.repo.create(title)

    async def all_chats(self) -> list[ChatRow]:
        return await self.repo.all_chats()

    async def page(self, p: ListChatsParams) -> tuple[list[ChatRow], str | None]:
        """chats/list: a keyset page, most recently active first."""
        pages = Pages("chats/list", {}, tuple[str, str])
        rows = await self.repo.page(p.page_size + 1, pages.after(p.page_token))
        return pages.page(rows, p.page_size, lambda c: (c.updated_at, c.id))

    async def require(self, chat_id: str) -> ChatRow:
        """The chat, or NotFound."""
        return await self.workspace.require_chat(chat_id)

    async def get(self, chat_id: str) -> tuple[ChatRow, list[MessageRow]]:
        chat = await self.workspace.require_chat(chat_id)
        return chat, await self.repo.messages(chat_id)

    async def manifest_after(self, chat_id: str, message_id: str) -> str | None:
        await self.workspace.require_chat(chat_id)
        messages = {m.id: m for m in await self.repo.messages(chat_id)}
        if message_id not in messages:
            raise NotFound("message", message_id)
        return effective_manifest(messages, message_id)

    async def delete(self, chat_id: str) -> None:
        self._check_idle(chat_id)
        async with self.workspace.locked(chat_id):
            await self.repo.delete(chat_id)
            await self.workspace.forget(chat_id)

    async def add_message(self, chat_id: str, role: Role, content: str, parent_id: str | None) -> MessageRow:
        """Append a message under ``parent_id`` (default: the active leaf) and make it active.
        Adding under an earlier message starts a new branch with that message's files."""
        self._check_idle(chat_id)
        msg = MessageRow(id=new_id(), chat_id=chat_id, role=role, content=content, status="complete", created_at=now())
        first, _ = await self.append(chat_id, msgspec.UNSET if parent_id is None else parent_id, msg)
        return first

    async def append(self, chat_id: str, parent_id: str | None | msgspec.UnsetType, *new: MessageRow
                     ) -> tuple[MessageRow, str | None]:
        """Add ``new`` (a chain: each the parent of the next) under ``parent_id`` (UNSET: the active
        leaf; None: as a new first message), the workspace brought to that point first; the last
        becomes the active leaf. Returns the first message and the manifest the chain starts from."""
        async with self.workspace.locked(chat_id) as (ws, chat):
            messages = await self.repo.messages(chat_id)
            by_id = {m.id: m for m in messages}
            if parent_id is msgspec.UNSET:
                parent_id = chat.active_leaf_message_id
            elif parent_id is not None and parent_id not in by_id:
                raise NotFound("message", parent_id)
            await self.workspace.capture(ws, chat)  # outside edits stay with the branch they hit
            inherited = effective_manifest(by_id, parent_id)
            if parent_id != chat.active_leaf_message_id and inherited != ws.active_manifest_id:
                await self.workspace.switch(ws, chat, parent_id, inherited)  # a crash in it keeps the old branch
            own = ws.active_manifest_id if ws.active_manifest_id != inherited else None
            first = new[0]
            first.parent_id, first.manifest_id = parent_id, own
            for parent, child in zip(new, new[1:], strict=False):
                child.parent_id = parent.id
            await self.repo.insert(*new, manifest_id=ws.active_manifest_id)
            return first, ws.active_manifest_id

    async def switch_branch(self, chat_id: str, message_id: str) -> ChatRow:
        self._check_idle(chat_id)
        async with self.workspace.locked(chat_id) as (ws, chat):
            messages = await self.repo.messages(chat_id)
            by_id = {m.id: m for m in messages}
            if message_id not in by_id:
                raise NotFound("message", message_id)
            if await self.workspace.capture(ws, chat) is not None:
                messages = await self.repo.messages(chat_id)  # the leaf's manifest just changed
                by_id = {m.id: m for m in messages}
            leaf = latest_leaf(messages, message_id)
            target = effective_manifest(by_id, leaf)
            await self.workspace.switch(ws, chat, leaf, target)
            updated = await self.repo.get(chat_id)
            assert updated is not None
            return updated

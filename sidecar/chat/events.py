"""A turn's notifications: numbered per message and with streamed text coalesced.

Text is held until about 30 ms have passed since its first piece or 2 KB have gathered, and always
goes out before any other event, so the UI sees every step in order without a notification per token.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from anyio.abc import TaskGroup

from ..api.chats import ChatEventParams, TextDeltaEvent

Emit = Callable[[ChatEventParams], Awaitable[None]]

WINDOW = 0.03
MAX_BYTES = 2048


class EventStream:
    def __init__(self, emit: Emit, chat_id: str, message_id: str, tg: TaskGroup) -> None:
        self._emit = emit
        self.chat_id = chat_id
        self.message_id = message_id
        self._tg = tg
        self._seq = 0
        self._text: list[str] = []
        self._size = 0
        self._batch = 0  # which gathering the pending timer belongs to
        self.sent = 0

    async def text(self, text: str) -> None:
        if not text:
            return
        if not self._text:
            self._batch += 1
            self._tg.start_soon(self._flush_later, self._batch)
        self._text.append(text)
        self._size += len(text)
        if self._size >= MAX_BYTES:
            await self.flush()

    async def send(self, event: Any) -> None:
        await self.flush()
        await self._send(event)

    async def flush(self) -> None:
        if self._text:
            text = "".join(self._text)
            self._text.clear()
            self._size = 0
            self._batch += 1  # the pending timer, if any, now has nothing to do
            await self._send(TextDeltaEvent(text))

    async def _flush_later(self, batch: int) -> None:
        await anyio.sleep(WINDOW)
        if batch == self._batch:
            await self.flush()

    async def _send(self, event: Any) -> None:
        # No await before handing it over: the connection keeps the order of its callers, so
        # seq order is wire order without a lock.
        self._seq += 1
        self.sent += 1
        await self._emit(ChatEventParams(self.chat_id, self.message_id, self._seq, event))

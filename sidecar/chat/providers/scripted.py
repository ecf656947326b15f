"""The offline provider: always there, the default when nothing else is configured.

Without a script it reads the user's last message: each line ``/tool <toolId> <json args>`` becomes
a tool call, and once the results are back it answers with a short summary of them; any other
message is echoed back, streamed word by word. With ``config.script`` (a list of replies, used in
order, one per model call, then the default behaviour again) tests and benchmarks decide exactly
what the "model" says:

    {"text": "...", "toolCalls": [{"tool": "write_file", "args": {...}}], "delayMs": 5,
     "chunk": 3, "error": "cut", "usage": {"inputTokens": 1, "outputTokens": 2}, "stamp": false}

``echoTools`` replies with the names of the tools it was offered, as a JSON list (deferred
ones prefixed ``~``); ``echoContext`` replies with the messages it was given, as JSON
(``[{role, content}, ...]``, the request's system text first when it has one);
``chunk`` is words per delta (default 1); ``delayMs`` waits before each delta; ``error`` fails the
stream after the text; ``stamp`` prefixes each delta with ``@<CLOCK_MONOTONIC ns>@`` so a client on
the same machine can measure how long a delta took to reach it.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import AsyncIterator
from typing import Any

import anyio
import anyio.lowlevel

from ...errors import ProviderError
from .base import (
    ChatMessage,
    Finished,
    ProviderEvent,
    TextDelta,
    ToolCallReady,
    ToolCallRequest,
    ToolLimits,
    ToolSpec,
    TurnRequest,
    Usage,
)

_TOOL_LINE = re.compile(r"^/tool\s+(\S+)\s*(.*)$")
_WORDS = re.compile(r"\S+\s*|\s+")


class ScriptedProvider:
    kind = "scripted"

    def __init__(self, id: str, config: dict[str, Any] | None = None) -> None:
        self.id = id
        self.script: list[dict[str, Any]] = list((config or {}).get("script") or [])
        self._next = 0
        self._calls = 0
        # contextWindow and maxTools as a remote provider's config says them, so tests can set bounds.
        window, most = (config or {}).get("contextWindow"), (config or {}).get("maxTools")
        self.tool_limits = ToolLimits(window if isinstance(window, int) and window > 0 else 128_000,
                                      most if isinstance(most, int) and most > 0 else None)

    async def stream(self, request: TurnRequest) -> AsyncIterator[ProviderEvent]:
        if self._next < len(self.script):
            reply = self.script[self._next]
            self._next += 1
        else:
            reply = _default_reply(request.messages)
        if reply.get("echoContext"):
            # What the "model" was given, as its reply: tests read exactly what a model would see.
            given = [{"role": m.role, "content": m.content} for m in request.messages]
            if request.system:
                given.insert(0, {"role": "system", "content": request.system})
            reply = {**reply, "text": json.dumps(given, ensure_ascii=False)}
        if reply.get("echoTools"):
            # The names of the tools it was given (deferred ones marked "~"), as its reply.
            reply = {**reply, "text": json.dumps([("~" if t.deferred else "") + t.name for t in request.tools])}
        async for event in self._play(reply, request.tools):
            yield event

    async def _play(self, reply: dict[str, Any], tools: list[ToolSpec]) -> AsyncIterator[ProviderEvent]:
        delay = float(reply.get("delayMs") or 0) / 1000
        words = _WORDS.findall(str(reply.get("text") or ""))
        step = max(1, int(reply.get("chunk") or 1))
        for i in range(0, len(words), step):
            if delay:
                await anyio.sleep(delay)
            else:
                await anyio.lowlevel.checkpoint()  # like a real stream, let the rest of the sidecar run
            text = "".join(words[i:i + step])
            yield TextDelta(f"@{time.monotonic_ns()}@{text}" if reply.get("stamp") else text)
        if reply.get("error"):
            raise ProviderError(str(reply["error"]), retryable=True)
        calls = []
        for call in reply.get("toolCalls") or []:
            self._calls += 1
            name = _alias_of(str(call.get("tool", "")), tools)
            args = call.get("args")
            calls.append(ToolCallRequest(
                id=f"call_{self._calls}", name=name, arguments=args if isinstance(args, dict) else None,
                raw_arguments=json.dumps(args) if args is not None else str(call.get("rawArgs", ""))))
        for call in calls:
            yield ToolCallReady(call)
        usage = reply.get("usage") or {}
        yield Usage(usage.get("inputTokens", 0), usage.get("outputTokens", len(words)))
        yield Finished("tool_use" if calls else "end_turn", model="scripted")


def _alias_of(tool: str, tools: list[ToolSpec]) -> str:
    """The name the turn gave the tool called ``tool`` (its id, or its alias itself)."""
    for spec in tools:
        if tool in (spec.tool_id, spec.name):
            return spec.name
    return tool  # not given to the "model": the turn answers that it does not exist


def _default_reply(messages: list[ChatMessage]) -> dict[str, Any]:
    last_user = max((i for i, m in enumerate(messages) if m.role == "user"), default=-1)
    results = [m for m in messages[last_user + 1:] if m.role == "tool"]
    if results:
        return {"text": _summary(messages[last_user + 1:])}
    text = messages[last_user].content if last_user >= 0 else ""
    calls = []
    for line in text.splitlines():
        m = _TOOL_LINE.match(line.strip())
        if m is None:
            continue
        try:
            args: Any = json.loads(m.group(2)) if m.group(2).strip() else {}
        except ValueError:
            calls.append({"tool": m.group(1), "args": None, "rawArgs": m.group(2)})
            continue
        calls.append({"tool": m.group(1), "args": args})
    if calls:
        return {"text": f"Running {len(calls)} tool{'s' if len(calls) > 1 else ''}.\n", "toolCalls": calls}
    return {"text": text or "(nothing to echo)"}


def _summary(after_user: list[ChatMessage]) -> str:
    names = {c.id: c.name for m in after_user if m.role == "assistant" for c in m.tool_calls}
    lines = []
    for m in after_user:
        if m.role != "tool":
            continue
        name = names.get(m.tool_call_id or "", "a tool")
        lines = m.content.strip().splitlines()
        if lines and lines[0].startswith("<tool_output"):  # the frame around the result (chat/framing.py)
            lines = lines[1:-1]
        first = (lines or [""])[0]
        if len(first) > 120:
            first = first[:117] + "..."
        lines.append(f"- {name}: {'failed' if m.is_error else 'done'}{f' ({first})' if first else ''}")
    return f"Results of {len(lines)} tool call{'s' if len(lines) != 1 else ''}:\n" + "\n".join(lines)

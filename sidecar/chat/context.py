"""What a model is shown: the branch from the root to the new message, tool calls and their
results in the order they happened, rebuilt from the stored messages and tool calls."""

from __future__ import annotations

import json
from typing import Any

from ..store.chats import MessageRow
from ..store.tool_calls import ToolCallRow
from .providers.base import ChatMessage, ToolCallRequest

# A result longer than this goes to a file in the workspace; the model gets a preview and the path.
RESULT_BUDGET = 16 * 1024
PREVIEW = 2 * 1024


def branch(messages: list[MessageRow], leaf_id: str | None) -> list[MessageRow]:
    """Root -> leaf, following parent links."""
    by_id = {m.id: m for m in messages}
    path: list[MessageRow] = []
    seen: set[str] = set()
    while leaf_id is not None and leaf_id in by_id and leaf_id not in seen:
        seen.add(leaf_id)
        path.append(by_id[leaf_id])
        leaf_id = by_id[leaf_id].parent_id
    path.reverse()
    return path


def parts_of(msg: MessageRow) -> Any:
    return json.loads(msg.parts) if msg.parts else None


def result_text(call: ToolCallRow) -> str:
    """A tool call's outcome as the model reads it."""
    if call.status != "success":
        return f"Error: {call.error or 'the tool failed'}"
    result = call.result
    if isinstance(result, dict) and isinstance(result.get("content"), list):  # an MCP result
        pieces = []
        for block in result["content"]:
            kind = block.get("type")
            if kind == "text":
                pieces.append(str(block.get("text", "")))
            elif kind == "resource":
                res = block.get("resource") or {}
                pieces.append(str(res.get("text") or f"[resource {res.get('uri', '')}]"))
            else:
                pieces.append(f"[{kind} {block.get('mimeType', '')}]".replace(" ]", "]"))
        if result.get("structuredContent") is not None and not any(pieces):
            pieces.append(json.dumps(result["structuredContent"], ensure_ascii=False))
        return "\n".join(pieces)
    if isinstance(result, str):
        return result
    return json.dumps(result, ensure_ascii=False)


def spilled_text(text: str, path: str) -> str:
    return (f"{text[:PREVIEW]}\n[... {len(text)} characters in all; the whole result is in the workspace "
            f"file {path}]")


def build(path: list[MessageRow], calls: dict[str, ToolCallRow]) -> list[ChatMessage]:
    out: list[ChatMessage] = []
    by_message: dict[str | None, list[ToolCallRow]] = {}
    for c in calls.values():
        by_message.setdefault(c.message_id, []).append(c)
    for msg in path:
        if msg.role == "assistant" and msg.parts:
            out += _steps(parts_of(msg).get("steps") or [], calls)
        elif msg.role == "tool":  # run from the "+" palette: the model hears of it as the user's doing
            ran = by_message.get(msg.id, [])
            text = "\n".join(f"[The user ran the tool {c.tool_id} with {json.dumps(c.args, ensure_ascii=False)}. "
                             f"Result: {result_text(c)[:RESULT_BUDGET]}]" for c in ran)
            out.append(ChatMessage("user", text or msg.content))
        elif msg.role in ("user", "assistant", "system"):
            out.append(ChatMessage(msg.role, msg.content))
    return out


def _steps(steps: list[dict[str, Any]], calls: dict[str, ToolCallRow]) -> list[ChatMessage]:
    """[text, call, call, text, ...] -> assistant(text, calls), tool results, assistant(text)."""
    out: list[ChatMessage] = []
    text: list[str] = []
    pending: list[dict[str, Any]] = []

    def close() -> None:
        if not text and not pending:
            return
        requests = [ToolCallRequest(s["callId"], s["name"], calls[s["id"]].args if s["id"] in calls else {})
                    for s in pending]
        out.append(ChatMessage("assistant", "".join(text), tool_calls=requests))
        for step in pending:
            call = calls.get(step["id"])
            body = result_text(call) if call else "Error: the result of this call was lost"
            if step.get("spill"):
                body = spilled_text(body, step["spill"])
            out.append(ChatMessage("tool", body, tool_call_id=step["callId"],
                                   is_error=call is None or call.status != "success"))
        text.clear()
        pending.clear()

    for step in steps:
        if step.get("t") == "text":
            if pending:
                close()
            text.append(step.get("text", ""))
        elif step.get("t") == "call":
            pending.append(step)
    close()
    return out

"""What a model is shown: the branch from the root to the new message, tool calls and their
results in the order they happened, rebuilt from the stored messages and tool calls. Each result
is given as ``framing`` says (bounded, cleaned, framed), the way the turn that ran it gave it."""

from __future__ import annotations

import json
from typing import Any

from ..store.chats import MessageRow
from ..store.tool_calls import ToolCallRow
from ..tools import cards
from . import audio, framing, images
from .framing import View
from .providers.base import AudioPart, ChatMessage, ImagePart, ToolCallRequest

_MEDIA = {k.block: k for k in (images.KIND, audio.KIND)}  # by MCP content type


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


def result_text(call: ToolCallRow, *, images_follow: bool = False) -> str:
    """A tool call's outcome as the model reads it. ``images_follow``: the result's pictures and
    sound are given to the model with it (see ``media``), and the text says which."""
    if call.status != "success":
        return f"Error: {call.error or 'the tool failed'}"
    result = call.result
    if isinstance(result, dict) and isinstance(result.get("content"), list):  # an MCP result
        pieces = []
        given = dict.fromkeys(_MEDIA, 0)  # of each kind, so far
        for block in result["content"]:
            kind = block.get("type")
            if kind == "text":
                pieces.append(str(block.get("text", "")))
            elif kind == "resource":
                res = block.get("resource") or {}
                pieces.append(str(res.get("text") or f"[resource {res.get('uri', '')}]"))
            elif kind == "resource_link":
                title = block.get("title") or block.get("name") or ""
                mime = f", {block['mimeType']}" if block.get("mimeType") else ""
                pieces.append(f"[resource link: {title} <{block.get('uri', '')}>{mime}]")
            elif (media_kind := _MEDIA.get(kind)) is not None and not images_follow:
                pieces.append(f"[{kind} {block.get('mimeType', '')}]")
            elif media_kind is not None:
                refused = media_kind.refused(block) or (media_kind.too_many if given[kind] == media_kind.most else None)
                given[kind] += not refused
                pieces.append(f"[{kind} {given[kind]}: {block.get('mimeType', '')}, given to you after this result]"
                              if not refused else f"[{kind} {block.get('mimeType', '')}: {refused}]")
            else:
                pieces.append(f"[{kind} {block.get('mimeType', '')}]".replace(" ]", "]"))
        if result.get("structuredContent") is not None and not any(pieces):
            pieces.append(json.dumps(result["structuredContent"], ensure_ascii=False))
        return "\n".join(pieces)
    if isinstance(result, str):
        return result
    return json.dumps(result, ensure_ascii=False)


def media(call: ToolCallRow, view: View) -> tuple[list[ImagePart], list[AudioPart]]:
    """The pictures and sound given to the model with a result (none beside a card shown in
    place of text)."""
    if call.status != "success" or view.card_only:
        return [], []
    return images.of(call.result), audio.of(call.result)


def model_text(call: ToolCallRow, view: View, *, images_follow: bool = False) -> str:
    """The result as the model may read it, before any cut: a card's text rather than its markup,
    or only a note that the card was shown."""
    plan = call.render_plan
    if call.status == "success" and plan and plan.get("renderer") == "card":
        if view.card_only:
            return framing.card_note(str(plan.get("config", {}).get("title") or ""))
        text = cards.model_text(call.result)
        if text is not None:
            return framing.prepare(text, view)
    return framing.prepare(result_text(call, images_follow=images_follow), view)


def spilled_text(text: str, path: str, max_chars: int) -> str:
    return (f"{text[:max_chars]}\n[... {len(text)} characters in all; the whole result is in the workspace "
            f"file {path}: read it with read_file, a part at a time (offset and limit)]")


def cut_text(text: str, max_chars: int) -> str:
    if len(text) <= max_chars:
        return text
    return f"{text[:max_chars]}\n[... {len(text)} characters in all; the rest is not shown]"


def tool_message(step: dict[str, Any], call: ToolCallRow | None) -> ChatMessage:
    """A past call's result as its turn gave it to the model (``step["view"]``), except that an
    ephemeral one is only named: later turns do not see it again."""
    view = View.load(step.get("view"))
    if call is None:
        body = "Error: the result of this call was lost"
    elif view.ephemeral:
        body = framing.EPHEMERAL
    else:
        body = model_text(call, view, images_follow=True)
        spill = step.get("spill")
        body = spilled_text(body, spill, view.max_chars) if spill else cut_text(body, view.max_chars)
    failed = call is None or call.status != "success"
    pictures, sound = media(call, view) if call is not None and not view.ephemeral else ([], [])
    return ChatMessage("tool", framing.frame(step.get("name") or "", body, error=failed),
                       tool_call_id=step["callId"], is_error=failed, images=pictures, audio=sound)


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
            views = (parts_of(msg) or {}).get("views") or {}
            given = ChatMessage("user", msg.content)
            texts = []
            for c in ran:
                view = View.load(views.get(c.id))
                texts.append(_palette_run(c, view))
                _add_media(given, c, view)
            given.content = "\n".join(texts) or msg.content
            out.append(given)
        elif msg.role == "user" and (ran_id := (parts_of(msg) or {}).get("ran")):
            # A scheduled run's output: its text is the message; its pictures and sound go with it.
            given = ChatMessage("user", msg.content)
            if ran_id in calls:
                _add_media(given, calls[ran_id], View.load((parts_of(msg) or {}).get("view")))
            out.append(given)
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
            out.append(tool_message(step, calls.get(step["id"])))
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


def _add_media(message: ChatMessage, call: ToolCallRow, view: View) -> None:
    pictures, sound = media(call, view) if not view.ephemeral else ([], [])
    message.images += pictures
    message.audio += sound


def _palette_run(call: ToolCallRow, view: View) -> str:
    body = (framing.EPHEMERAL if view.ephemeral
            else cut_text(model_text(call, view, images_follow=True), view.max_chars))
    return (f"[The user ran the tool {call.tool_id} with {json.dumps(call.args, ensure_ascii=False)}.]\n"
            + framing.frame(call.tool_id, body, error=call.status != "success"))

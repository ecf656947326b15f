"""A chat turn (seed 000 §4.3, §7.4 ``stream``; the prompt turn of the Agent Client Protocol):
the user's message joins the branch, the model's reply streams, its tool calls run in the chat's
workspace through the same path as ``tools/call``, results go back to the model, until it stops.

The assistant message is stored when the turn starts (status ``streaming``), checkpointed while a
long turn runs, and written whole when it ends, however it ends; never per token. Its ``parts``
keep the steps (text and tool calls, in order), so the next turn can show the model exactly what
happened. Tool calls are stored by the tool-call service, each when it starts and ends.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any

import anyio
import msgspec

from ..api.chats import (
    ConfirmToolCallParams,
    ConfirmToolCallResult,
    ErrorEvent,
    MessageCompletedEvent,
    MessageStartedEvent,
    SendParams,
    SendResult,
    StopReason,
    TokenUsage,
    ToolCallFinishedEvent,
    ToolCallStartedEvent,
    ToolsOfferedEvent,
)
from ..api.errors import ErrorCode
from ..api.tool_calls import ClientContext, ToolCall
from ..api.tools import Tool
from ..errors import InvalidParams, NotConfigured, ProviderError, SidecarError, ToolsSwitchedOff
from ..secrets import clean
from ..store.chats import MessageRow, MessageStatus
from ..store.rows import new_id, now
from ..store.tool_calls import PALETTE, Confirmation, Initiator, ToolCallRow
from ..tools import permissions
from ..tools.switch import Killed
from ..tools.validate import check_args
from . import context, framing, offer, toolbox
from .events import Emit, EventStream
from .providers.base import (
    ChatMessage,
    Finished,
    NativeBlock,
    TextDelta,
    ToolCallReady,
    ToolCallRequest,
    ToolLimits,
    TurnRequest,
    Usage,
)

if TYPE_CHECKING:
    from ..store import Database
    from ..tools.calls import ToolCallService
    from ..tools.catalog import Catalog
    from ..tools.ranking import Ranker
    from ..tools.switch import ToolSwitch
    from ..workspace.service import WorkspaceService
    from .chats import ChatService
    from .providers.base import Provider
    from .providers.service import ProviderService

log = logging.getLogger("sidecar.chat")

Confirm = Callable[[ConfirmToolCallParams], Awaitable[ConfirmToolCallResult]]
WaitCancel = Callable[[], Awaitable[None]]

CHECKPOINT_EVERY = 2.0  # seconds between writes of a running turn's message
MAX_TURNS = 100
SPILL_DIR = ".tool-results"
_NEVER_RAN = {"unknown_tool", "arguments", "denied", "cancelled", "unavailable", "unconfigured", "tools_off"}
# What a model is told while the user's kill switch is off (it is offered no tools then).
TOOLS_OFF = ("The user has switched all tools off: none can be called in this conversation until they are "
             "switched on again. Answer without tools, and say so if a tool would have been needed.")
_STATUS_AFTER: dict[StopReason, MessageStatus] = {
    "endTurn": "complete", "maxTurns": "complete", "cancelled": "cancelled", "error": "error"}


def call_out(row: ToolCallRow) -> ToolCall:
    return msgspec.convert(row, ToolCall, from_attributes=True)


@dataclass
class _Turn:
    chat_id: str
    message: MessageRow
    events: EventStream
    tools: toolbox.ToolBox
    offer: offer.Offer
    client_context: ClientContext | None = None  # what the UI said of the user's time and place
    steps: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])
    input_tokens: int = 0
    output_tokens: int = 0
    offers: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])  # one per model call
    saved_at: float = field(default_factory=time.monotonic)

    pieces: list[str] = field(default_factory=list[str])  # streamed into the last step, not joined yet

    @property
    def text(self) -> str:
        self._join()
        return "".join(s["text"] for s in self.steps if s["t"] == "text")

    def add_text(self, text: str) -> None:
        # Gathered as pieces: += on the step's string would copy the whole reply per delta.
        if not self.steps or self.steps[-1]["t"] != "text":
            self.steps.append({"t": "text", "text": ""})
        self.pieces.append(text)

    def add_step(self, step: dict[str, Any]) -> None:
        self._join()
        self.steps.append(step)

    def _join(self) -> None:
        if self.pieces:
            self.steps[-1]["text"] += "".join(self.pieces)
            self.pieces.clear()

    def usage(self) -> TokenUsage | None:
        if not (self.input_tokens or self.output_tokens):
            return None
        return TokenUsage(self.input_tokens, self.output_tokens)


class TurnService:
    def __init__(self, db: Database, chats: ChatService, workspace: WorkspaceService, tool_calls: ToolCallService,
                 providers: ProviderService, catalog: Catalog, switch: ToolSwitch, ranker: Ranker,
                 selection: offer.SelectionSettings) -> None:
        self.chats = chats
        self.workspace = workspace
        self.db = db  # the chat's tool grants and attachments (permissions, toolbox)
        self.tool_calls = tool_calls  # every tool call of a turn or the palette goes through its `call`
        self.catalog = catalog  # which tools a turn offers
        self.switch = switch  # the user's kill switch: off, a turn offers no tools
        self.providers = providers
        self.ranker = ranker  # what a turn over its tool budget ranks the chat's tools with
        self.selection = selection  # the user's tool-selection settings (a chat may override them)

    async def send(self, p: SendParams, emit: Emit, confirm: Confirm, wait_cancel: WaitCancel,
                   *, ran: str | None = None) -> SendResult:
        """``ran``: the tool call (a scheduled run in this chat) whose output the message is; its
        pictures and sound go to the model with it, in this turn and the ones after."""
        if not 1 <= p.max_turns <= MAX_TURNS:
            raise InvalidParams("params.maxTurns", f"must be between 1 and {MAX_TURNS}")
        await self.workspace.require_chat(p.chat_id)
        provider = await self.providers.get(p.provider)
        attached = [(a.kind, await toolbox.check_attachment(self.db, a.kind, a.id)) for a in p.attachments]
        replay = await self._replay_of(p.chat_id, p.tools_from) if p.tools_from is not None else None
        self.chats.claim(p.chat_id)
        try:
            return await self._send(p, provider, attached, emit, confirm, wait_cancel, ran, replay)
        finally:
            self.chats.release(p.chat_id)

    async def _replay_of(self, chat_id: str, message_id: str) -> dict[str, Any]:
        """What the first model call of a stored assistant message was offered (chat/send toolsFrom)."""
        found = next((m for m in await self.chats.repo.messages(chat_id) if m.id == message_id), None)
        steps = offer.stored(found) if found is not None else []
        if not steps:
            raise InvalidParams("params.toolsFrom", f"{message_id!r} is no assistant message of this chat with "
                                                    "a stored tool offer (a turn's reply)")
        return steps[0]

    async def offer_for(self, chat_id: str, box: toolbox.ToolBox, path: list[MessageRow], limits: ToolLimits,
                        replay: dict[str, Any] | None = None) -> offer.Offer:
        """The first model call's offer of a turn on the branch ``path`` (the chat's settings over the user's)."""
        selection = offer.Selection.of(self.selection.current.wire(), await self.chats.repo.tool_settings(chat_id))
        return await offer.choose(box, selection, limits, self.ranker, offer.recent_text(path),
                                  kept=offer.loaded_before(path, max(selection.k, 1) * 2), replay=replay)

    async def _send(self, p: SendParams, provider: Provider, attached: list[tuple[str, str]], emit: Emit,
                    confirm: Confirm, wait_cancel: WaitCancel, ran: str | None,
                    replay: dict[str, Any] | None) -> SendResult:
        stamp = now()
        kept: dict[str, Any] = {"attachments": [{"kind": k, "id": i} for k, i in attached]} if attached else {}
        if ran is not None:
            kept["ran"] = ran
        parts = json.dumps(kept) if kept else None
        user = MessageRow(id=new_id(), chat_id=p.chat_id, role="user", content=p.content, status="complete",
                          created_at=stamp, parts=parts)
        reply = MessageRow(id=new_id(), chat_id=p.chat_id, role="assistant", content="", status="streaming",
                           created_at=stamp, provider=provider.id, model=p.model)
        _, start_manifest = await self.chats.append(p.chat_id, p.parent_id, user, reply)
        messages = await self.chats.repo.messages(p.chat_id)
        path = context.branch(messages, user.id)
        calls = {c.id: c for c in await self.tool_calls.history(p.chat_id)}
        history = context.build(path, calls)
        if p.system:
            history.insert(0, ChatMessage("system", p.system))
        tools = await toolbox.build(self.catalog, toolbox.branch_attachments(path))
        limits = getattr(provider, "tool_limits", None) or ToolLimits()
        offered = await self.offer_for(p.chat_id, tools, path, limits, replay)

        stop: StopReason = "endTurn"
        error: str | None = None
        usage: TokenUsage | None = None
        async with anyio.create_task_group() as tg:
            turn = _Turn(p.chat_id, reply, EventStream(emit, p.chat_id, reply.id, tg), tools, offered,
                         p.client_context)
            await turn.events.send(MessageStartedEvent(user.id, provider.id, user.parent_id, p.model))

            async def watch() -> None:
                await wait_cancel()
                work.cancel()

            tg.start_soon(watch)
            with anyio.CancelScope() as work:
                try:
                    stop = await self._loop(turn, provider, p, history, confirm)
                # Error texts may quote what a library saw (a header, a URL): scrubbed before they leave.
                except ProviderError as exc:
                    stop, error = "error", clean(exc.message)
                    await turn.events.send(ErrorEvent(error, int(ErrorCode.UPSTREAM_ERROR), exc.retryable))
                except SidecarError as exc:
                    stop, error = "error", clean(exc.message)
                    await turn.events.send(ErrorEvent(error, int(exc.code)))
                except Exception as exc:  # a bug must end the turn, not the sidecar; the partial reply stays
                    log.exception("chat turn %s failed", reply.id)
                    stop, error = "error", clean(f"the turn failed: {type(exc).__name__}: {exc}")
                    await turn.events.send(ErrorEvent(error, int(ErrorCode.INTERNAL_ERROR)))
            if work.cancelled_caught:
                stop = "cancelled"
            with anyio.CancelScope(shield=True):
                await self._finish(turn, stop, start_manifest)
            usage = turn.usage()
            tg.cancel_scope.cancel()
        return SendResult(reply.id, user.id, stop, error, usage)

    async def invoke(self, chat_id: str, tool_id: str, args: dict[str, Any],
                     parent_id: str | None | msgspec.UnsetType = msgspec.UNSET,
                     client_context: ClientContext | None = None) -> tuple[MessageRow, ToolCallRow]:
        """Run one tool in a chat without a model (the "+" palette, seed 002): it becomes a
        ``tool`` message in the branch (under ``parent_id``; UNSET: the active leaf; None: as a
        new first message), with its call, render plan and the files after it."""
        self.switch.check()  # refused before anything joins the branch
        await self.workspace.require_chat(chat_id)
        target = await self.tool_calls.resolve(tool_id)  # "+slug" / "+slug@version" as typed
        tool = target.tool
        # Refused before anything joins the branch; whether a disabled tool may run is for the
        # branch to say (an attached toolset's), and for the call.
        self.tool_calls.check(target, args, chat_id, allow_disabled=None)
        attached = not tool.enabled and await self._attached(chat_id, tool.id, parent_id)
        self.chats.claim(chat_id)
        try:
            msg = MessageRow(id=new_id(), chat_id=chat_id, role="tool", content=f"Ran {tool.name}", status="streaming",
                             created_at=now())
            _, start_manifest = await self.chats.append(chat_id, parent_id, msg)
            row: ToolCallRow | None = None
            try:
                row = await self.tool_calls.call(target, args, chat_id, message_id=msg.id, allow_disabled=attached,
                                                 client_context=client_context, origin=PALETTE)
                # How later turns are given this result, decided now as for a model's call.
                msg.parts = json.dumps({"views": {row.id: (await self._view(row)).stored()}})
            finally:
                # The message is the active leaf: the call's snapshot already recorded its manifest.
                msg.status = "complete" if row is not None else "cancelled"
                msg.content = f"Ran {tool.name}: {'done' if row and row.status == 'success' else 'failed'}"
                with anyio.CancelScope(shield=True):
                    await self.chats.repo.update(msg)
            chat = await self.workspace.require_chat(chat_id)
            if chat.active_manifest_id != start_manifest:
                msg.manifest_id = chat.active_manifest_id
            assert row is not None  # (only a cancelled call leaves it unset, and that raised)
            return msg, row
        finally:
            self.chats.release(chat_id)

    async def _attached(self, chat_id: str, tool_id: str, parent_id: str | None | msgspec.UnsetType) -> bool:
        """Whether the branch a palette call joins attached the tool (seed 003): then it runs, as a
        model's call would there, though its toolset is off; in any other branch or chat it does not."""
        if parent_id is None:
            return False
        chat, messages = await self.chats.get(chat_id)
        leaf = chat.active_leaf_message_id if isinstance(parent_id, msgspec.UnsetType) else parent_id
        box = await toolbox.build(self.catalog, toolbox.branch_attachments(context.branch(messages, leaf)))
        return any(t.attached and t.tool.id == tool_id for t in box.tools)

    async def _loop(self, turn: _Turn, provider: Provider, p: SendParams, history: list[ChatMessage],
                    confirm: Confirm) -> StopReason:
        switch = self.switch
        guide = framing.server_instructions(
            {key: text for key in turn.tools.mcp_servers() if (text := self.catalog.instructions(key))})
        for _ in range(p.max_turns):
            said: list[str] = []
            asked: list[ToolCallRequest] = []
            native: list[dict[str, Any]] = []
            # Read per model call: switched off mid-turn, the next call is offered no tools.
            request = (TurnRequest(p.model, history, turn.offer.specs(), system=guide) if switch.enabled
                       else TurnRequest(p.model, history, [], system=TOOLS_OFF))
            await self._offered(turn, switch.enabled)
            async for event in provider.stream(request):
                if isinstance(event, TextDelta):
                    said.append(event.text)
                    turn.add_text(event.text)
                    await turn.events.text(event.text)
                    if time.monotonic() - turn.saved_at > CHECKPOINT_EVERY:
                        await self._save(turn, "streaming", None)  # a crash mid-stream keeps the text
                elif isinstance(event, ToolCallReady):
                    asked.append(event.call)
                elif isinstance(event, Usage):
                    turn.input_tokens += event.input_tokens or 0
                    turn.output_tokens += event.output_tokens or 0
                elif isinstance(event, NativeBlock):  # the provider's tool search ran
                    native.append(event.block)
                    turn.offer.loaded_by_search(event.loaded)
                elif isinstance(event, Finished) and event.model and not turn.message.model:
                    turn.message.model = event.model
            history.append(ChatMessage("assistant", "".join(said), tool_calls=asked, native=native))
            if not asked:
                return "endTurn"
            for call in asked:
                if turn.offer.is_find(call.name) and switch.enabled:
                    history.append(await self._find(turn, call))
                else:
                    history.append(await self._call(turn, call, confirm))
            if time.monotonic() - turn.saved_at > CHECKPOINT_EVERY:
                await self._save(turn, "streaming", None)
        return "maxTurns"

    async def _offered(self, turn: _Turn, enabled: bool) -> None:
        """Say (and keep, for the message) what this model call is offered."""
        if enabled:
            record = turn.offer.record()
            tokens = turn.offer.tokens()
        else:
            record, tokens = {"toolIds": [], "deferred": 0, "reason": "toolsOff", "findTools": False}, 0
        turn.offers.append(record)
        turn.offer.loaded = []  # what the next call loads is its own
        await turn.events.send(ToolsOfferedEvent(record["toolIds"], record["deferred"], record["reason"],
                                                 record["findTools"], tokens))

    async def _find(self, turn: _Turn, call: ToolCallRequest) -> ChatMessage:
        """find_tools: this turn's own tool, no catalog tool, so no tool call record; the step keeps
        what it loaded (the model's next call is offered those too)."""
        text, failed, loaded = await turn.offer.find_answer(call.arguments)
        turn.add_step({"t": "find", "callId": call.id, "name": call.name,
                       "query": str((call.arguments or {}).get("query", ""))[:offer.MAX_QUERY_CHARS],
                       "loaded": loaded})
        return ChatMessage("tool", framing.frame(call.name, text, error=failed), tool_call_id=call.id,
                           is_error=failed)

    # -- one tool call -------------------------------------------------------------------------

    async def _call(self, turn: _Turn, call: ToolCallRequest, confirm: Confirm) -> ChatMessage:
        """Run one call the model asked for; whatever happens, the model gets an answer. A tool of
        the chat it was not offered (over the budget) is loaded and called, not refused."""
        chosen = turn.offer.lookup(call.name) or turn.offer.named(call.name)
        record = ToolCallRow(id=new_id(), tool_id=chosen.tool.id if chosen else call.name, chat_id=turn.chat_id,
                             message_id=turn.message.id, args=call.arguments or {}, status="running",
                             started_at=now(), started_by="model",
                             toolset_id=chosen.tool.toolset_id if chosen else None,
                             provider=chosen.tool.provider if chosen else None)
        step: dict[str, Any] = {"t": "call", "id": record.id, "callId": call.id, "name": call.name}
        turn.add_step(step)
        display = chosen.display if chosen else call.name
        if not self.switch.enabled:
            row = await self._refuse(turn, record, display, "tools_off", ToolsSwitchedOff.MESSAGE)
        elif chosen is None:
            shown = sorted(t.alias for t in turn.offer.offered)
            names = ", ".join(shown[:50]) + (f" and {len(shown) - 50} more" if len(shown) > 50 else "") or "none"
            more = " (find_tools finds more)" if turn.offer.find else ""
            row = await self._refuse(turn, record, display, "unknown_tool",
                                     f"there is no tool {call.name!r} in this chat; the tools are: {names}{more}")
        elif call.arguments is None:
            row = await self._refuse(turn, record, display, "arguments",
                                     f"the arguments were not a JSON object: {call.raw_arguments[:500]!r}")
        else:
            row = await self._checked_run(turn, chosen, record, display, confirm)
        return await self._answer(turn, call, row, step)

    async def _checked_run(self, turn: _Turn, chosen: toolbox.ChatTool, record: ToolCallRow, display: str,
                           confirm: Confirm) -> ToolCallRow:
        tool = chosen.tool
        try:
            check_args(tool.input_schema, record.args)
        except InvalidParams as exc:
            return await self._refuse(turn, record, display, "arguments", _why(exc))
        confirmation: Confirmation = "notNeeded"
        if tool.requires_confirmation:
            confirmation = await permissions.granted(self.db, turn.chat_id, tool) or "userOnce"
        if confirmation == "userOnce":
            asked = await self._ask(turn, tool, record, display, confirm)
            if isinstance(asked, ToolCallRow):  # refused: denied, not answered, edited arguments that fail
                return asked
            confirmation = asked
        return await self._run(turn, chosen, record, display, confirmation)

    async def _ask(self, turn: _Turn, tool: Tool, record: ToolCallRow, display: str,
                   confirm: Confirm) -> Confirmation | ToolCallRow:
        """Ask the user about the call: how they allowed it (their edited arguments, if any, go
        on the record), or the record of its refusal."""
        await turn.events.flush()
        try:
            # Switched off meanwhile, the question is withdrawn (the UI gets $/cancelRequest).
            answer = await self.switch.run(confirm, ConfirmToolCallParams(
                turn.chat_id, record.id, tool.id, display, record.args, turn.message.id, tool.description))
        except Killed:
            return await self._refuse(turn, record, display, "tools_off", ToolsSwitchedOff.MESSAGE)
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):  # the turn ends here; the question stays in its history
                await self._refuse(turn, record, display, "cancelled", "the turn was cancelled before the "
                                                                       "user answered")
            raise
        except Exception as exc:  # the UI answered with an error, or went away
            return await self._refuse(turn, record, display, "denied", f"the user could not be asked: {exc}")
        if answer.decision == "deny":
            record.confirmation = "userDenied"
            return await self._refuse(turn, record, display, "denied", "the user denied this tool call")
        if answer.args is not None:
            record.args = answer.args
            try:
                check_args(tool.input_schema, record.args)
            except InvalidParams as exc:
                return await self._refuse(turn, record, display, "arguments", f"the edited arguments: {_why(exc)}")
        if answer.decision in ("allowChat", "allowAlways"):
            await permissions.remember(self.db, turn.chat_id, tool, answer.decision)
        return _ANSWERED[answer.decision]

    async def _run(self, turn: _Turn, chosen: toolbox.ChatTool, record: ToolCallRow, display: str,
                   confirmation: Confirmation) -> ToolCallRow:
        """The call through the one call path (resolved there, after any question: the tool may
        have gone or been switched off meanwhile); refused as the model should hear it."""

        async def started(row: ToolCallRow) -> None:
            await turn.events.send(ToolCallStartedEvent(call_out(row), display))

        try:
            row = await self.tool_calls.call(chosen.tool.id, record.args, turn.chat_id, message_id=turn.message.id,
                                             on_started=started, call_id=record.id, allow_disabled=chosen.attached,
                                             client_context=turn.client_context,
                                             origin=Initiator(started_by="model", confirmation=confirmation))
        except NotConfigured as exc:  # the model hears which keys the user has to set first
            return await self._refuse(turn, record, display, "unconfigured", exc.message)
        except ToolsSwitchedOff as exc:  # switched off since this call was checked (just after an answer)
            return await self._refuse(turn, record, display, "tools_off", exc.message)
        except SidecarError as exc:  # the tool went away or was switched off since the turn began
            return await self._refuse(turn, record, display, "unavailable", exc.message)
        await turn.events.send(ToolCallFinishedEvent(call_out(row)))
        return row

    async def _refuse(self, turn: _Turn, record: ToolCallRow, display: str, kind: str, why: str) -> ToolCallRow:
        record.error, record.error_kind = why, kind
        record.finished_at = now()
        await self.tool_calls.record_refused(record)
        await turn.events.send(ToolCallStartedEvent(call_out(record), display))
        await turn.events.send(ToolCallFinishedEvent(call_out(record)))
        return record

    async def _answer(self, turn: _Turn, call: ToolCallRequest, row: ToolCallRow, step: dict[str, Any]) -> ChatMessage:
        """The model's view of the result (``framing``): this turn sees it even when it is
        ephemeral; the step keeps how it was given, for the turns after."""
        view = await self._view(row)
        step["view"] = view.stored()
        text = context.model_text(row, view, images_follow=True)
        if view.ephemeral:
            text = context.cut_text(text, view.max_chars)  # not kept: no file of it either
        elif len(text) > view.max_chars:
            # Too much for the context: the whole result goes to a workspace file the model can read.
            path = str(PurePosixPath(SPILL_DIR) / f"{row.id}.txt")
            try:
                await self.workspace.write_file(turn.chat_id, path, text.encode("utf-8"))
            except InvalidParams as exc:  # a tool put a link (or a file) at .tool-results: never
                log.warning("chat %s: result of %s cut, not spilled: %s", turn.chat_id, row.id, exc.reason)
                text = context.cut_text(text, view.max_chars)  # written through; the turn goes on
            else:
                step["spill"] = path
                text = context.spilled_text(text, path, view.max_chars)
        failed = row.status != "success"
        # This turn sees its pictures and sound even when the result is ephemeral (as it sees the text).
        pictures, sound = context.media(row, view)
        return ChatMessage("tool", framing.frame(call.name, text, error=failed), tool_call_id=call.id,
                           is_error=failed, images=pictures, audio=sound)

    async def _view(self, row: ToolCallRow) -> framing.View:
        """How the tool's manifest (``output``) wants its result given; the defaults for a call
        that never ran or a tool that is gone."""
        if row.error_kind in _NEVER_RAN:
            return framing.View()
        try:
            target = await self.catalog.resolve(row.tool_id)
        except SidecarError:
            return framing.View()
        return framing.View.of(target.config.output, row.render_plan)

    # -- the end -------------------------------------------------------------------------------

    async def _finish(self, turn: _Turn, stop: StopReason, start_manifest: str | None) -> None:
        await self._save(turn, _STATUS_AFTER[stop], stop)
        # The reply is the active leaf (the chat is claimed): each tool call's snapshot has
        # recorded the files after it on the message already.
        chat = await self.workspace.require_chat(turn.chat_id)
        manifest = chat.active_manifest_id if chat.active_manifest_id != start_manifest else None
        await turn.events.send(MessageCompletedEvent(stop, turn.text, manifest, turn.usage()))

    async def _save(self, turn: _Turn, status: MessageStatus, stop: str | None) -> None:
        msg = turn.message
        msg.content, msg.status, msg.stop_reason = turn.text, status, stop  # (text joins the pieces)
        msg.parts = json.dumps({"steps": turn.steps})
        msg.usage = json.dumps({"inputTokens": turn.input_tokens, "outputTokens": turn.output_tokens})
        msg.tools_offered = json.dumps(turn.offers) if turn.offers else None
        await self.chats.repo.update(msg)
        turn.saved_at = time.monotonic()


_ANSWERED: dict[str, Confirmation] = {"allowOnce": "userOnce", "allowChat": "userChat",
                                       "allowAlways": "userAlways"}


def _why(exc: InvalidParams) -> str:
    data = exc.data or {}
    return f"{str(data['path']).removeprefix('params.')}: {data['reason']}"

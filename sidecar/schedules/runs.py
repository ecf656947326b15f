"""One run of a schedule: its tool call (refused and recorded when the tool or chat is gone, or
the tool needs a confirmation nobody can give), then its output posted to the schedule's chat as
a user message that starts a turn. ``service.Schedules`` decides when a run happens."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import TYPE_CHECKING

import anyio

from ..api.chats import ConfirmToolCallParams, ConfirmToolCallResult, SendParams
from ..chat import context, framing
from ..chat.events import Emit
from ..errors import Conflict, InvalidParams, NotConfigured, NotFound, SidecarError
from ..store import Database
from ..store.rows import new_id, now
from ..store.schedules import ScheduleRepo, ScheduleRow
from ..store.tool_calls import Confirmation, Initiator, ToolCallRow
from ..store.toolsets import ToolsetRepo
from ..tools import permissions

if TYPE_CHECKING:
    from ..chat.turns import TurnService
    from ..tools.calls import ToolCallService
    from ..tools.resolved import Resolved
    from ..workspace.service import WorkspaceService

log = logging.getLogger("sidecar.schedules")

BUSY_RETRY = 2.0  # seconds between tries to post to a chat whose turn is still running
BUSY_GIVE_UP = 600.0  # seconds after which the output is not posted (last_error says so)
# How long a scheduled turn waits for the user to answer a tool's confirmation: nobody may be
# there, and the schedule's next runs are skipped while its turn goes on.
CONFIRM_WAIT = 600.0

Confirm = Callable[[ConfirmToolCallParams], Awaitable[ConfirmToolCallResult]]


def message(prompt: str | None, output: str) -> str:
    """Seed 004: the prompt template with the tool's output appended (or where ``{{output}}`` is)."""
    if not prompt:
        return output
    if "{{output}}" in prompt:
        return prompt.replace("{{output}}", output)
    return f"{prompt}\n\n{output}"


class Runs:
    def __init__(self, db: Database, repo: ScheduleRepo, workspace: WorkspaceService, tool_calls: ToolCallService,
                 turns: TurnService, *, chat_event: Emit, confirm: Confirm) -> None:
        self.db = db
        self.repo = repo
        self.tool_calls = tool_calls
        self.turns = turns
        self.workspace = workspace
        self._chat_event = chat_event
        self._confirm = confirm

    async def _why_gone(self, tool_id: str) -> str:
        """Why a schedule's tool cannot be found: its toolset is soft-deleted (restoring it resumes
        the schedule), or it is gone for good."""
        toolset_id = toolset_of(tool_id)
        toolset = await ToolsetRepo(self.db).get(toolset_id) if toolset_id else None
        if toolset is not None and toolset.soft_deleted_at is not None:
            return toolset_deleted(toolset.id)
        return tool_gone(tool_id)

    async def call(self, s: ScheduleRow, *, by_user: bool) -> tuple[ToolCallRow, str]:
        """The tool call of one run and the message it makes. A run that is refused before the
        tool starts is recorded too, then raises (a gone tool or chat pauses the schedule)."""
        record = ToolCallRow(id=new_id(), tool_id=s.tool_id, chat_id=s.chat_id, args=s.args, status="running",
                             started_at=now(), started_by="schedule", schedule_id=s.id)
        try:
            target = await self.tool_calls.resolve(s.tool_id)
            if s.chat_id is not None:
                await self.workspace.require_chat(s.chat_id)
        except NotFound as exc:
            kind = (exc.data or {}).get("kind")
            if kind == "tool" and s.tool_id.startswith("mcp:"):
                # Its server is there but not connected (yet: at start the servers connect in the
                # background): this run fails, the schedule stays.
                await self._refused(s, record, "unavailable", exc.message)
                raise
            reason = (f"its chat {s.chat_id} was deleted; choose another chat (or none) with schedules/update"
                      if kind == "chat" else await self._why_gone(s.tool_id))
            await self.repo.pause(s.id, reason)
            if kind == "chat":
                record.chat_id = None  # the record cannot belong to a chat that is gone
            await self._refused(s, record, "unavailable", reason)
            raise
        tool = target.tool
        record.toolset_id, record.provider = tool.toolset_id, tool.provider
        confirmation: Confirmation | None = "notNeeded"
        if tool.requires_confirmation:
            # Run by the user (runNow): nothing to ask. Unattended: the schedule's permission, or
            # a grant the user gave the tool in a chat turn.
            confirmation = None if by_user else "schedule" if s.allow_unattended else (
                await permissions.granted(self.db, s.chat_id or "", tool))
        record.confirmation = confirmation
        if tool.requires_confirmation and not by_user and confirmation is None:
            reason = (f"{tool.id} asks for confirmation before it runs; to let this schedule run it unattended, "
                      "update it with allowUnattended: true")
            await self.repo.pause(s.id, reason)
            await self._refused(s, record, "denied", reason)
            raise Conflict("needs confirmation", reason)
        try:
            row = await self._run_tool(s, record, target)
        except NotConfigured as exc:
            await self._refused(s, record, "unconfigured", exc.message)
            raise
        except InvalidParams as exc:  # the tool's schema changed under the stored arguments
            await self._refused(s, record, "arguments", exc.message)
            raise
        except SidecarError as exc:  # disabled, switched off, its server not connected
            await self._refused(s, record, "unavailable", exc.message)
            raise
        # The card's text, never "a card was shown": nobody saw this run's card.
        view = replace(framing.View.of(target.config.output, row.render_plan), card_only=False)
        # Its pictures and sound go with the chat message it becomes (``_post``), and the text says so.
        text = context.cut_text(context.model_text(row, view, images_follow=s.chat_id is not None), view.max_chars)
        if row.status != "success":
            text = f"[{tool.name} failed: {row.error or 'no reason given'}]\n{text}".rstrip()
        await self.repo.ran(s.id, row.finished_at or now(), row.id, row.status, row.error)
        return row, message(s.prompt, text)

    async def _run_tool(self, s: ScheduleRow, record: ToolCallRow, target: Resolved) -> ToolCallRow:
        origin = Initiator(started_by="schedule", schedule_id=s.id, confirmation=record.confirmation)
        return await self.tool_calls.call(target, s.args, s.chat_id, call_id=record.id, origin=origin)

    async def _refused(self, s: ScheduleRow, record: ToolCallRow, kind: str, why: str) -> None:
        record.error, record.error_kind, record.finished_at = why, kind, now()
        await self.tool_calls.record_refused(record)
        await self.repo.ran(s.id, record.finished_at, record.id, "error", why)

    async def post(self, s: ScheduleRow, text: str, ran: str) -> None:
        assert s.chat_id is not None
        params = SendParams(chat_id=s.chat_id, content=text, provider=s.provider, model=s.model)
        give_up = anyio.current_time() + BUSY_GIVE_UP
        while True:
            try:
                result = await self.turns.send(params, self._chat_event, self._ask, anyio.sleep_forever, ran=ran)
                break
            except Conflict:  # the user's own turn is running in that chat: this one goes after it
                if anyio.current_time() > give_up:
                    await self._note(s, f"the chat was busy for {BUSY_GIVE_UP:.0f} s; this run's output was not "
                                        "posted")
                    return
                await anyio.sleep(BUSY_RETRY)
            except NotFound as exc:
                await self.repo.pause(s.id, f"its chat or provider is gone: {exc.message}")
                return
        if result.error:
            await self._note(s, f"the turn it started failed: {result.error}")

    async def _ask(self, params: ConfirmToolCallParams) -> ConfirmToolCallResult:
        """A model's tool call in a scheduled turn asks the UI, as in any turn, but not forever:
        unanswered, the call is refused (the turn goes on and ends)."""
        with anyio.move_on_after(CONFIRM_WAIT):
            return await self._confirm(params)
        raise TimeoutError(f"no answer within {CONFIRM_WAIT:.0f} s (this turn was started by a schedule)")

    async def _note(self, s: ScheduleRow, error: str) -> None:
        row = await self.repo.get(s.id)
        if row is not None:
            await self.repo.ran(s.id, row.last_run_at or now(), row.last_tool_call_id, row.last_status or "error",
                                error)


def toolset_of(tool_id: str) -> str | None:
    """The toolset a tool id names (``ts:tool``, ``mcp:ts~server:tool``); None for a built-in."""
    if tool_id.startswith("mcp:"):
        ref = tool_id.removeprefix("mcp:").partition(":")[0]
        return ref.partition("~")[0] if "~" in ref else None
    head, sep, _ = tool_id.partition(":")
    return head if sep else None


def toolset_deleted(toolset_id: str) -> str:
    """Why a schedule of a soft-deleted toolset's tool is paused (restoring the toolset resumes it)."""
    return f"its toolset {toolset_id} was deleted; restoring it (toolsets/restore) resumes this schedule"


def tool_gone(tool_id: str) -> str:
    return (f"its tool {tool_id} is gone (uninstalled, or removed by an upgrade); choose another tool with "
            "schedules/update, or delete the schedule")

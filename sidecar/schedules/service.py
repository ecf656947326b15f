"""Schedules: their rules (what a valid schedule is) and the one task that fires them (a run itself: ``runs``).

The task sleeps until the first ``next_run_at`` (``clock.Clock``: naps bounded so a suspended
laptop's wake-up is noticed), then fires every schedule that is due. Before any run starts, each
due schedule's ``next_run_at`` moves to its first slot after *now*: a schedule several slots
behind (after a suspend, a clock jump, tools switched back on) runs once, never once per slot.
The first pass after start (and after tools are switched back on) applies each schedule's
``missed`` rule to slots that passed meanwhile: ``runOnce`` runs once, ``skip`` does not.

A run: the tool call through ``ToolCallService`` (the tool's sandbox, config and confirmation
rules; every run, refused ones too, is a tool call record), then its output, after the prompt
template, becomes a user message in the schedule's chat starting a turn there, and
``schedules/fired`` tells the UI. Runs of one schedule never overlap (one that is still running
when its next slot comes skips that slot); at most ``CONCURRENCY`` tool calls of schedules run at
once (``CONCURRENCY`` runners take them from a queue), so a thousand schedules due in the same
minute wait their turn instead of crowding the event loop.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import anyio
import anyio.lowlevel
import msgspec
from anyio.abc import TaskGroup

from .. import cron, frozen
from ..api.schedules import CreateScheduleParams, FiredParams, UpdateScheduleParams
from ..chat.events import Emit
from ..chat.turns import call_out
from ..errors import Conflict, InvalidParams, NotFound, SidecarError
from ..store import Database
from ..store.rows import new_id, now
from ..store.schedules import ScheduleRepo, ScheduleRow
from ..store.tool_calls import ToolCallRow
from ..store.toolsets import ToolsetRepo
from ..tools.validate import check_args
from .clock import Clock, WallClock
from .runs import Confirm, Runs, tool_gone, toolset_deleted

if TYPE_CHECKING:
    from ..chat.providers.service import ProviderService
    from ..chat.turns import TurnService
    from ..tools.calls import ToolCallService
    from ..tools.catalog import Catalog
    from ..workspace.service import WorkspaceService

log = logging.getLogger("sidecar.schedules")

CONCURRENCY = 8  # tool calls of schedules at once
# At start, a slot older than this was missed while the sidecar was down (``missed`` decides);
# a younger one is a restart across its minute and simply runs.
MISSED_AFTER = timedelta(seconds=60)

Fired = Callable[[FiredParams], Awaitable[None]]


def stamp(at: datetime) -> str:
    """``at`` as stored: UTC in ``rows.now()``'s form, so text order is time order."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_stamp(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)


class Schedules:
    def __init__(self, db: Database, workspace: WorkspaceService, tool_calls: ToolCallService, turns: TurnService,
                 catalog: Catalog, providers: ProviderService, *, fired: Fired, chat_event: Emit, confirm: Confirm,
                 clock: Clock | None = None, tools_enabled: Callable[[], bool] = lambda: True) -> None:
        self.db = db
        self.repo = ScheduleRepo(db)
        self.tool_calls = tool_calls
        self.catalog = catalog  # what a schedule's tool is, when it is made or changed
        self.providers = providers
        self.turns = turns
        self.workspace = workspace
        self.clock: Clock = clock or WallClock()
        self._fired = fired
        self.runs = Runs(db, self.repo, workspace, tool_calls, turns, chat_event=chat_event, confirm=confirm)
        self.tools_enabled = tools_enabled  # the kill switch's reading (off: nothing fires)
        self._wake = anyio.Event()
        self._running: set[str] = set()
        # Due runs wait here for one of CONCURRENCY runners: a thousand due at once are a thousand
        # queued rows, not a thousand tasks.
        self._queue, self._queued = anyio.create_memory_object_stream[ScheduleRow](math.inf)
        self.busy = 0  # runners in a tool call now (at most CONCURRENCY)
        self._tg: TaskGroup | None = None
        self._closed = anyio.CancelScope()
        self.passes = 0  # scheduler passes so far (debug and tests)

    @property
    def running(self) -> frozenset[str]:
        """Ids of the schedules with a run in progress (its turn included)."""
        return frozenset(self._running)

    def bind(self, tg: TaskGroup) -> None:
        """Start firing schedules in ``tg``, until ``aclose``."""
        tg.start_soon(self._main)

    async def aclose(self) -> None:
        """Fire nothing more; runs in progress are cancelled (their tool calls are recorded so)."""
        self._closed.cancel()

    async def _main(self) -> None:
        with self._closed:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                for _ in range(CONCURRENCY):
                    tg.start_soon(self._runner)
                await self._loop()

    def wake(self) -> None:
        """Plan again now: a schedule changed, or tools were switched on or off."""
        self._wake.set()

    # -- the user's side --------------------------------------------------------------------

    async def list(self, chat_id: str | None = None, tool_id: str | None = None) -> list[ScheduleRow]:
        if await self.repo.pause_orphans_of_chats():
            self.wake()
        return await self.repo.all(chat_id=chat_id, tool_id=tool_id)

    async def get(self, schedule_id: str) -> ScheduleRow:
        row = await self.repo.get(schedule_id)
        if row is None:
            raise NotFound("schedule", schedule_id)
        return row

    async def create(self, p: CreateScheduleParams) -> ScheduleRow:
        at = now()
        s = ScheduleRow(id=new_id(), tool_id=p.tool_id, args=p.args, cron=p.cron,
                        timezone=p.timezone or cron.local_zone(), prompt=p.prompt, chat_id=p.chat_id,
                        provider=p.provider, model=p.model, enabled=p.enabled, missed=p.missed,
                        allow_unattended=p.allow_unattended, created_at=at, updated_at=at)
        await self._check(s)
        self._plan(s)
        await self.repo.put(s)
        self.wake()
        return s

    async def update(self, p: UpdateScheduleParams) -> ScheduleRow:
        s = await self.get(p.id)
        before = (s.cron, s.timezone, s.enabled, s.paused_reason)
        for f in p.__struct_fields__:
            value = getattr(p, f)
            if f != "id" and value is not msgspec.UNSET:
                setattr(s, f, value)
        if s.enabled:
            await self._check(s)  # a schedule that may fire is whole again: any pause is over
            s.paused_reason = None
        else:
            s.cron = _cron(s.cron)
            s.timezone = _zone(s.timezone)
        if (s.cron, s.timezone, s.enabled, s.paused_reason) != before:
            self._plan(s)
        s.updated_at = now()
        await self.repo.put(s)
        self.wake()
        return s

    async def delete(self, schedule_id: str) -> None:
        if not await self.repo.delete(schedule_id):
            raise NotFound("schedule", schedule_id)
        self.wake()

    async def run_now(self, schedule_id: str) -> ToolCallRow:
        """Run once, now, as the user (who is there to say so: no confirmation is asked); a turn
        in its chat goes on after this returns."""
        s = await self.get(schedule_id)
        if self._tg is None or self._closed.cancel_called:
            raise Conflict("shutting down", "the scheduler is not running")
        self._claim(s.id)
        try:
            row, text = await self.runs.call(s, by_user=True)
        except BaseException:
            self._release(s.id)
            raise
        self._tg.start_soon(self._follow_up, s, row, text)
        return row

    async def toolset_changed(self, toolset_id: str) -> None:
        """A toolset was installed, upgraded, switched or uninstalled: its manifest's triggers
        become, stay or stop being schedules; a user's schedule of a tool that went is paused."""
        toolset = await ToolsetRepo(self.db).get(toolset_id)
        if toolset is not None and await self._follow_soft_delete(toolset_id, toolset.soft_deleted_at is not None):
            return
        tools = await ToolsetRepo(self.db).tools(toolset_id) if toolset is not None else []
        declared = {t.tool_id: t for t in tools if (t.config.get("trigger") or {}).get("type") == "cron"}
        present = {t.tool_id for t in tools}
        existing = await self.repo.of_toolset(toolset_id)
        gone: list[str] = []
        for s in existing:
            if s.source == "manifest" and s.toolset_id == toolset_id:
                t = declared.pop(s.tool_id, None)
                if t is None:
                    gone.append(s.id)  # the trigger (or the tool, or the toolset) was taken out
                    continue
                trigger = t.config["trigger"]
                if s.declared != trigger:  # the manifest changed its trigger: that wins over an edit
                    s.cron, s.prompt, s.declared, s.updated_at = (trigger["schedule"], trigger.get("prompt"),
                                                                  trigger, now())
                    self._plan(s)
                    await self.repo.put(s)
            elif s.paused_reason is None and (toolset is None or (not s.tool_id.startswith("mcp:")
                                                                  and s.tool_id not in present)):
                await self.repo.pause(s.id, tool_gone(s.tool_id))
        await self.repo.delete_many(gone)
        for t in declared.values():
            trigger = t.config["trigger"]
            at = now()
            s = ScheduleRow(id=new_id(), tool_id=t.tool_id, cron=trigger["schedule"], timezone=cron.local_zone(),
                            prompt=trigger.get("prompt"), source="manifest", toolset_id=toolset_id,
                            declared=trigger, created_at=at, updated_at=at)
            if t.requires_confirmation:
                s.paused_reason = (f"{t.tool_id} asks for confirmation before it runs; to let this schedule run it "
                                   "unattended, update it with allowUnattended: true")
            self._plan(s)
            await self.repo.put(s)
        self.wake()

    async def _follow_soft_delete(self, toolset_id: str, deleted: bool) -> bool:
        """A soft-deleted toolset's schedules pause (saying how to bring them back); restoring it
        resumes the ones paused so, as they were. True when the toolset is deleted (nothing else to do)."""
        reason = toolset_deleted(toolset_id)
        resumed = False
        for s in await self.repo.of_toolset(toolset_id):
            if deleted and s.paused_reason is None:
                await self.repo.pause(s.id, reason)
            elif not deleted and s.paused_reason == reason:
                s.paused_reason, s.updated_at = None, now()
                self._plan(s)
                await self.repo.put(s)
                resumed = True
        if deleted or resumed:
            self.wake()
        return deleted

    async def _check(self, s: ScheduleRow) -> None:
        """Refuse what could never run, saying what to fix; canonicalise what can."""
        s.cron = _cron(s.cron)
        s.timezone = _zone(s.timezone)
        target = await self.catalog.resolve(s.tool_id)
        tool = target.tool
        s.tool_id = tool.id
        if tool.unavailable_reason is not None:
            raise Conflict("tool unavailable", f"{tool.id} cannot run: {tool.unavailable_reason}")
        if tool.toolset_id is not None:
            toolset = await ToolsetRepo(self.db).get(tool.toolset_id)
            if toolset is not None:
                frozen.refuse_changes(toolset.id, toolset.enabled, toolset.soft_deleted_at, "schedule its tools")
        check_args(tool.input_schema, s.args)
        if s.chat_id is None and (tool.provider == "builtin" or target.config.needs_workspace):
            raise InvalidParams("params.chatId", f"{tool.id} works on a chat's workspace files; give the chatId "
                                                 "of the chat it is to work in")
        if s.chat_id is not None:
            await self.workspace.require_chat(s.chat_id)
        if s.provider is not None:
            await self.providers.get(s.provider)
        if tool.requires_confirmation and not s.allow_unattended:
            raise InvalidParams("params.allowUnattended", f"{tool.id} asks for confirmation before it runs; set "
                                                          "allowUnattended: true to let this schedule run it "
                                                          "without asking")

    def _plan(self, s: ScheduleRow) -> None:
        if not s.enabled or s.paused_reason is not None:
            s.next_run_at = None
            return
        s.next_run_at = stamp(cron.next_after(s.cron, self.clock.now(), s.timezone))

    # -- firing ------------------------------------------------------------------------------

    async def _loop(self) -> None:
        catch_up = True  # the first pass meets the slots that passed while the sidecar was down
        while True:
            self._wake = anyio.Event()
            first: datetime | None = None
            try:
                if self.tools_enabled():
                    await self._fire_due(catch_up)
                    catch_up = False
                    due = await self.repo.first_due()
                    first = parse_stamp(due) if due else None
                else:
                    catch_up = True  # switched back on: what passed meanwhile follows ``missed``
            except Exception:  # the scheduler outlives a bad pass (a locked disk, a bad row)
                log.exception("a scheduler pass failed; trying again shortly")
            self.passes += 1
            await self.clock.wait(first, self._wake)

    async def _fire_due(self, catch_up: bool) -> None:
        at = self.clock.now()
        due = await self.repo.due(stamp(at))
        nexts: list[tuple[str | None, str]] = []
        launch: list[ScheduleRow] = []
        # cronsim takes ~0.1 ms per next time: schedules that share an expression and zone share
        # it, and a long list yields to the event loop as it goes (pings stay quick).
        memo: dict[tuple[str, str], str] = {}
        for n, s in enumerate(due):
            if n % 64 == 63:
                await anyio.lowlevel.checkpoint()
            slot = parse_stamp(s.next_run_at) if s.next_run_at else at
            try:
                key = (s.cron, s.timezone)
                if key not in memo:
                    memo[key] = stamp(cron.next_after(s.cron, at, s.timezone))
                nexts.append((memo[key], s.id))
            except Exception as exc:  # a zone this machine no longer knows, after an OS update
                await self.repo.pause(s.id, f"its cron or time zone cannot be used here: {exc}")
                continue
            if s.id in self._running:
                log.info("schedule %s is still running its last run; slot %s skipped", s.id, s.next_run_at)
            elif catch_up and s.missed == "skip" and at - slot > MISSED_AFTER:
                log.info("schedule %s missed %s while the sidecar was not running; skipped", s.id, s.next_run_at)
            else:
                launch.append(s)
        await self.repo.set_next(nexts)
        for s in launch:
            self._claim(s.id)
            self._queue.send_nowait(s)

    async def _runner(self) -> None:
        """Run queued schedules' tool calls one after another; each delivery (a turn may take a
        while) goes on in a task of its own, so the next call need not wait for it."""
        assert self._tg is not None
        async for s in self._queued:
            self.busy += 1
            try:
                row, text = await self.runs.call(s, by_user=False)
            except SidecarError as exc:
                log.info("schedule %s did not run: %s", s.id, exc.message)
                self._release(s.id)
                continue
            except Exception:
                log.exception("schedule %s failed", s.id)
                self._release(s.id)
                continue
            finally:
                self.busy -= 1
            self._tg.start_soon(self._follow_up, s, row, text)

    def _claim(self, schedule_id: str) -> None:
        if schedule_id in self._running:
            raise Conflict("schedule running", f"schedule {schedule_id} is running already; runs of one schedule "
                                               "never overlap: wait for this one to end")
        self._running.add(schedule_id)

    def _release(self, schedule_id: str) -> None:
        self._running.discard(schedule_id)

    async def _follow_up(self, s: ScheduleRow, row: ToolCallRow, text: str) -> None:
        """Tell the UI, then start the chat's turn; the schedule counts as running until the turn
        ends, so a slow turn is never overlapped by the next run."""
        try:
            await self._fired(FiredParams(s.id, call_out(row), text, s.chat_id))
            if s.chat_id is not None:
                await self.runs.post(s, text, row.id)
        except Exception:
            log.exception("schedule %s: its output could not be delivered", s.id)
        finally:
            self._release(s.id)


def _cron(expr: str) -> str:
    try:
        return cron.normalise(expr)
    except cron.CronError as exc:
        raise InvalidParams("params.cron", str(exc)) from None


def _zone(name: str) -> str:
    try:
        return cron.check_zone(name)
    except cron.CronError as exc:
        raise InvalidParams("params.timezone", str(exc)) from None


"""When schedules fire, on a clock the test moves: on time, once after a jump, what a restart
missed, never overlapping, and what a run does with its output."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import anyio
import pytest

from sidecar.api.schedules import CreateScheduleParams, UpdateScheduleParams
from sidecar.errors import Conflict, InvalidParams, ToolsSwitchedOff
from sidecar.schedules import runs
from sidecar.schedules.service import parse_stamp
from tests.schedules.support import FakeClock, built, until, write_toolset
from tests.timing import scaled

pytestmark = pytest.mark.anyio

T0 = datetime(2026, 3, 2, 10, 0, 10, tzinfo=UTC)  # a Monday, ten seconds past 10:00


def fired(peer, schedule_id: str) -> list:
    return [p for p in peer.of("schedules/fired") if p.schedule_id == schedule_id]


async def move(services, clock: FakeClock, at: datetime | None = None, **delta: float) -> None:
    """Move the clock, then wait for the scheduler to have looked at it and for its runs to end."""
    passes = services.schedules.passes
    clock.set(at) if at is not None else clock.advance(**delta)
    await until(lambda: services.schedules.passes > passes and not services.schedules.running)


async def idle(services) -> None:
    await until(lambda: not services.schedules.running)


async def test_a_schedule_fires_at_its_time_and_not_before(tmp_path: Path):
    clock = FakeClock(T0)
    async with built(tmp_path / "data", clock) as (services, peer):
        await services.toolsets.install(str(write_toolset(tmp_path)))
        s = await services.schedules.create(CreateScheduleParams(
            tool_id="clocked:hello", cron="*/5 * * * *", timezone="UTC", args={"name": "cron"}))
        assert s.next_run_at == "2026-03-02T10:05:00.000000Z"
        await move(services, clock, datetime(2026, 3, 2, 10, 4, 59, tzinfo=UTC))
        assert fired(peer, s.id) == []
        await move(services, clock, datetime(2026, 3, 2, 10, 5, 0, tzinfo=UTC))
        await until(lambda: fired(peer, s.id))
        await idle(services)
        [note] = fired(peer, s.id)
        assert note.tool_call.status == "success" and note.message == "hello cron" and note.chat_id is None
        row = await services.schedules.get(s.id)
        assert row.next_run_at == "2026-03-02T10:10:00.000000Z"
        assert row.last_status == "success" and row.last_tool_call_id == note.tool_call.id
        record = await services.tool_calls.repo.get(note.tool_call.id)
        assert record is not None and record.tool_id == "clocked:hello"  # in the audit trail, as the schedule's
        assert (record.started_by, record.schedule_id, record.confirmation) == ("schedule", s.id, "notNeeded")


async def test_after_a_clock_jump_what_is_due_runs_once(tmp_path: Path):
    clock = FakeClock(T0)
    async with built(tmp_path / "data", clock) as (services, peer):
        await services.toolsets.install(str(write_toolset(tmp_path)))
        s = await services.schedules.create(CreateScheduleParams(
            tool_id="clocked:hello", cron="* * * * *", timezone="UTC", missed="skip"))
        await move(services, clock, datetime(2026, 3, 2, 13, 7, 30, tzinfo=UTC))  # the laptop slept three hours
        await until(lambda: fired(peer, s.id))
        await move(services, clock, seconds=10)
        assert len(fired(peer, s.id)) == 1  # not 187 runs, one per slot it slept through
        assert (await services.schedules.get(s.id)).next_run_at == "2026-03-02T13:08:00.000000Z"


async def test_runs_missed_while_the_sidecar_was_down_follow_the_schedule(tmp_path: Path):
    clock = FakeClock(T0)
    await write_toolset_and_install(tmp_path, clock)
    async with built(tmp_path / "data", clock) as (services, _):
        once = await services.schedules.create(CreateScheduleParams(
            tool_id="clocked:hello", cron="*/5 * * * *", timezone="UTC"))
        skip = await services.schedules.create(CreateScheduleParams(
            tool_id="clocked:hello", cron="*/5 * * * *", timezone="UTC", missed="skip"))
    clock.set(datetime(2026, 3, 2, 12, 1, 0, tzinfo=UTC))  # down for two hours: 24 slots of each
    async with built(tmp_path / "data", clock) as (services, peer):
        await until(lambda: fired(peer, once.id))
        await move(services, clock, seconds=10)
        assert len(fired(peer, once.id)) == 1
        assert fired(peer, skip.id) == []
        for s in (once, skip):
            assert (await services.schedules.get(s.id)).next_run_at == "2026-03-02T12:05:00.000000Z"


async def write_toolset_and_install(tmp_path: Path, clock: FakeClock) -> None:
    async with built(tmp_path / "data", clock) as (services, _):
        await services.toolsets.install(str(write_toolset(tmp_path)))


async def test_runs_of_one_schedule_never_overlap(tmp_path: Path):
    clock = FakeClock(T0)
    async with built(tmp_path / "data", clock) as (services, peer):
        await services.toolsets.install(str(write_toolset(tmp_path)))
        s = await services.schedules.create(CreateScheduleParams(
            tool_id="clocked:slow", cron="* * * * *", timezone="UTC", args={"seconds": 1.5}))
        clock.advance(minutes=1)
        await until(lambda: s.id in services.schedules.running)
        with pytest.raises(Conflict, match="never overlap"):
            await services.schedules.run_now(s.id)
        passes = services.schedules.passes
        clock.advance(minutes=1)  # its next slot comes while the first run still sleeps
        await until(lambda: services.schedules.passes > passes)
        assert s.id in services.schedules.running
        await idle(services)
        assert len(fired(peer, s.id)) == 1
        assert (await services.schedules.get(s.id)).next_run_at == "2026-03-02T10:03:00.000000Z"


async def test_output_becomes_a_user_message_that_starts_a_turn_in_the_chat(tmp_path: Path):
    clock = FakeClock(T0)
    async with built(tmp_path / "data", clock) as (services, peer):
        await services.toolsets.install(str(write_toolset(tmp_path)))
        chat = await services.chats.create("daily")
        s = await services.schedules.create(CreateScheduleParams(
            tool_id="clocked:hello", cron="*/5 * * * *", timezone="UTC", chat_id=chat.id,
            prompt="Greet the user back:"))
        clock.advance(minutes=5)
        await until(lambda: fired(peer, s.id))
        await idle(services)
        _, messages = await services.chats.get(chat.id)
        user = [m for m in messages if m.role == "user"]
        assistant = [m for m in messages if m.role == "assistant"]
        assert [m.content for m in user] == ["Greet the user back:\n\nhello world"]
        assert len(assistant) == 1 and assistant[0].status == "complete"  # the scripted provider echoed it
        assert "hello world" in assistant[0].content
        events = peer.of("chat/event")
        assert events and {e.chat_id for e in events} == {chat.id}  # the turn streamed to the UI


async def test_a_scheduled_turn_does_not_wait_forever_for_an_absent_user(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(runs, "CONFIRM_WAIT", 0.2)
    clock = FakeClock(T0)
    async with built(tmp_path / "data", clock) as (services, peer):
        await services.toolsets.install(str(write_toolset(tmp_path)))
        peer.answers = False
        chat = await services.chats.create("away")
        # The scripted model runs each "/tool <id> <args>" line of the message it is sent.
        await services.schedules.create(CreateScheduleParams(
            tool_id="clocked:hello", cron="* * * * *", timezone="UTC", chat_id=chat.id,
            prompt="/tool clocked:careful {}\n{{output}}"))
        clock.advance(minutes=1)
        await until(lambda: peer.asked)
        await idle(services)  # the question went unanswered: the turn ended, the schedule is free
        _, messages = await services.chats.get(chat.id)
        [reply] = [m for m in messages if m.role == "assistant"]
        assert reply.status == "complete"
        calls = [c for c in await services.tool_calls.repo.for_chat(chat.id) if c.tool_id == "clocked:careful"]
        assert [(c.status, c.error_kind) for c in calls] == [("error", "denied")]
        assert "no answer within" in (calls[0].error or "")


async def test_a_tool_that_asks_first_runs_unattended_only_when_allowed(tmp_path: Path):
    clock = FakeClock(T0)
    async with built(tmp_path / "data", clock) as (services, peer):
        await services.toolsets.install(str(write_toolset(tmp_path)))
        with pytest.raises(InvalidParams, match="allowUnattended"):
            await services.schedules.create(CreateScheduleParams(
                tool_id="clocked:careful", cron="* * * * *", timezone="UTC"))
        s = await services.schedules.create(CreateScheduleParams(
            tool_id="clocked:careful", cron="* * * * *", timezone="UTC", allow_unattended=True))
        clock.advance(minutes=1)
        await until(lambda: fired(peer, s.id))
        call = fired(peer, s.id)[0].tool_call
        assert call.status == "success"
        record = await services.tool_calls.repo.get(call.id)
        assert record is not None and record.confirmation == "schedule"  # the schedule's permission, on record


async def test_a_manifest_trigger_is_a_schedule_that_follows_upgrades_and_uninstall(tmp_path: Path):
    clock = FakeClock(T0)
    async with built(tmp_path / "data", clock) as (services, peer):
        folder = write_toolset(tmp_path)
        await services.toolsets.install(str(folder))
        [s] = await services.schedules.list(tool_id="clocked:digest")
        assert (s.source, s.cron, s.prompt, s.toolset_id) == ("manifest", "*/30 * * * *",
                                                              "Summarise these reminders:", "clocked")
        assert s.next_run_at == "2026-03-02T10:30:00.000000Z"
        mine = await services.schedules.create(CreateScheduleParams(tool_id="clocked:hello", cron="0 9 * * *",
                                                                    timezone="Europe/Malta"))
        await services.schedules.update(UpdateScheduleParams(s.id, enabled=False, cron="*/15"))  # the user's
        await services.toolsets.set_enabled("clocked", False)
        await services.toolsets.set_enabled("clocked", True)
        await services.toolsets.install(str(folder), replace=True)  # the same manifest again
        [s1] = await services.schedules.list(tool_id="clocked:digest")
        assert (s1.cron, s1.enabled) == ("*/15 * * * *", False)  # the user's edit stays
        text = folder.joinpath("toolset.yaml").read_text().replace('"*/30"', '"0 * * * *"')
        folder.joinpath("toolset.yaml").write_text(text)
        await services.toolsets.install(str(folder), replace=True)
        [s2] = await services.schedules.list(tool_id="clocked:digest")
        assert (s2.id, s2.cron, s2.enabled) == (s.id, "0 * * * *", False)  # a new trigger wins; enabled stays
        await services.toolsets.uninstall("clocked")
        assert await services.schedules.list(tool_id="clocked:digest") == []  # the manifest's went with it
        kept = await services.schedules.get(mine.id)  # the user's is paused, not dropped
        assert kept.paused_reason and "clocked:hello" in kept.paused_reason and kept.next_run_at is None


async def test_a_manifest_tool_that_asks_first_starts_paused(tmp_path: Path):
    clock = FakeClock(T0)
    async with built(tmp_path / "data", clock) as (services, _):
        text = write_toolset(tmp_path).joinpath("toolset.yaml").read_text()
        text = text.replace("    entrypoint: tools.clocked:digest\n",
                            "    entrypoint: tools.clocked:digest\n    requires_confirmation: true\n")
        (tmp_path / "clocked" / "toolset.yaml").write_text(text)
        await services.toolsets.install(str(tmp_path / "clocked"))
        [s] = await services.schedules.list(tool_id="clocked:digest")
        assert s.paused_reason and "allowUnattended" in s.paused_reason and s.next_run_at is None
        s = await services.schedules.update(UpdateScheduleParams(s.id, allow_unattended=True))
        assert s.paused_reason is None and s.next_run_at == "2026-03-02T10:30:00.000000Z"


async def test_a_schedule_whose_chat_is_deleted_is_paused_with_the_reason(tmp_path: Path):
    clock = FakeClock(T0)
    async with built(tmp_path / "data", clock) as (services, peer):
        await services.toolsets.install(str(write_toolset(tmp_path)))
        chat = await services.chats.create("soon gone")
        s = await services.schedules.create(CreateScheduleParams(
            tool_id="clocked:hello", cron="* * * * *", timezone="UTC", chat_id=chat.id))
        await services.chats.delete(chat.id)
        await move(services, clock, minutes=1)  # it falls due: the run finds the chat gone
        paused = await services.schedules.get(s.id)
        assert paused.paused_reason and chat.id in paused.paused_reason and paused.next_run_at is None
        refused = await services.tool_calls.repo.get(paused.last_tool_call_id or "")
        assert refused is not None and refused.error_kind == "unavailable" and refused.chat_id is None
        await move(services, clock, minutes=3)
        assert fired(peer, s.id) == []
        [listed] = await services.schedules.list(tool_id="clocked:hello")
        assert listed.id == s.id and listed.paused_reason == paused.paused_reason  # kept, not dropped


async def test_listing_pauses_a_schedule_whose_chat_is_gone_before_it_falls_due(tmp_path: Path):
    clock = FakeClock(T0)
    async with built(tmp_path / "data", clock) as (services, _):
        await services.toolsets.install(str(write_toolset(tmp_path)))
        chat = await services.chats.create("soon gone")
        s = await services.schedules.create(CreateScheduleParams(
            tool_id="clocked:hello", cron="0 9 * * *", timezone="UTC", chat_id=chat.id))
        await services.chats.delete(chat.id)
        [listed] = await services.schedules.list(tool_id="clocked:hello")
        assert listed.id == s.id and listed.paused_reason and chat.id in listed.paused_reason


async def test_when_tools_are_switched_off_nothing_fires_until_they_are_on(tmp_path: Path):
    clock = FakeClock(T0)
    async with built(tmp_path / "data", clock) as (services, peer):
        await services.toolsets.install(str(write_toolset(tmp_path)))
        s = await services.schedules.create(CreateScheduleParams(
            tool_id="clocked:hello", cron="* * * * *", timezone="UTC"))
        await services.switch.set(False)  # the kill switch
        await move(services, clock, minutes=10)
        assert fired(peer, s.id) == []
        with pytest.raises(ToolsSwitchedOff):
            await services.schedules.run_now(s.id)
        refused = await services.tool_calls.repo.get((await services.schedules.get(s.id)).last_tool_call_id or "")
        assert refused is not None and refused.status == "error"  # the refused run is in the audit trail
        await services.switch.set(True)
        await until(lambda: fired(peer, s.id))
        await move(services, clock, seconds=5)
        assert len(fired(peer, s.id)) == 1  # runOnce: the ten minutes off make one run, not ten
        assert parse_stamp((await services.schedules.get(s.id)).next_run_at or "") > clock.now()


async def test_a_thousand_due_in_one_minute_run_at_most_a_few_at_a_time(tmp_path: Path):
    clock = FakeClock(T0)
    async with built(tmp_path / "data", clock) as (services, peer):
        await services.toolsets.install(str(write_toolset(tmp_path)))
        for i in range(200):
            await services.schedules.create(CreateScheduleParams(
                tool_id="clocked:hello", cron="* * * * *", timezone="UTC", args={"name": str(i)}))
        seen = 0
        clock.advance(minutes=1)
        with anyio.fail_after(scaled(60)):
            while len(peer.of("schedules/fired")) < 200:
                seen = max(seen, services.schedules.busy)
                await anyio.sleep(0.001)
        from sidecar.schedules.service import CONCURRENCY
        assert 1 < seen <= CONCURRENCY

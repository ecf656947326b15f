from __future__ import annotations

import msgspec

from .. import cron
from ..api.base import Empty
from ..api.schedules import (
    CreateScheduleParams,
    ListSchedulesParams,
    RunNowResult,
    Schedule,
    ScheduleIdParams,
    ScheduleResult,
    SchedulesResult,
    UpdateScheduleParams,
)
from ..chat.turns import call_out
from ..rpc import RequestContext
from ..schedules.service import Schedules
from ..store.schedules import ScheduleRow
from .routes import method


def schedule_out(s: ScheduleRow) -> Schedule:
    fields = msgspec.structs.asdict(s)
    del fields["declared"]  # the sidecar's own bookkeeping of manifest triggers
    return Schedule(**fields, explained=cron.explain(s.cron))


class ScheduleHandlers:
    def __init__(self, schedules: Schedules) -> None:
        self.schedules = schedules

    @method("schedules/list")
    async def list_schedules(self, p: ListSchedulesParams, ctx: RequestContext) -> SchedulesResult:
        return SchedulesResult([schedule_out(s) for s in await self.schedules.list(p.chat_id, p.tool_id)])

    @method("schedules/create")
    async def create(self, p: CreateScheduleParams, ctx: RequestContext) -> ScheduleResult:
        return ScheduleResult(schedule_out(await self.schedules.create(p)))

    @method("schedules/update")
    async def update(self, p: UpdateScheduleParams, ctx: RequestContext) -> ScheduleResult:
        return ScheduleResult(schedule_out(await self.schedules.update(p)))

    @method("schedules/delete")
    async def delete(self, p: ScheduleIdParams, ctx: RequestContext) -> Empty:
        await self.schedules.delete(p.id)
        return Empty()

    @method("schedules/runNow")
    async def run_now(self, p: ScheduleIdParams, ctx: RequestContext) -> RunNowResult:
        return RunNowResult(call_out(await self.schedules.run_now(p.id)))

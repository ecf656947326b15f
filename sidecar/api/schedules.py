"""Schedules: any tool run on a cron schedule (seed 004 ``trigger: {type: cron}``), its output
posted to a chat as a user message that starts a turn, or announced with ``schedules/fired``."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from .base import Empty, MethodSpec, Model
from .errors import ErrorCode
from .tool_calls import ToolCall

Missed = Literal["skip", "runOnce"]
Prompt = Annotated[str, msgspec.Meta(max_length=100_000)]

_CRON = ("Five fields (minute hour day-of-month month day-of-week, e.g. '0 9 * * 1-5'), seed 004's one-field "
         "'*/N' (every N minutes, N dividing 60) or @hourly/@daily/@weekly/@monthly/@yearly. Stored and shown in "
         "five fields. Seconds (six fields) are refused: a schedule fires at most once a minute.")
_TZ = "IANA time zone the cron expression is read in (Europe/Malta); default: the machine's zone."
_PROMPT = ("Seed 004's template: the tool's output is appended after it (after a blank line), or put where "
           "{{output}} stands. Absent: the output alone.")
_CHAT = ("The chat the run happens in: the tool works in its workspace, and the prompt and output become a user "
         "message there that starts a turn. Absent: the output is announced with schedules/fired.")
_PROVIDER = "The provider of the turn a run starts in the chat (providers/list id); default: the default provider."
_MODEL = "The model of that turn; default: the provider's default model."
_MISSED = ("What to do with runs that fell due while the sidecar was not running (or tools were switched off): "
           "'runOnce' runs once at start however many were missed; 'skip' waits for the next time.")
_UNATTENDED = ("The user lets this tool run unattended on this schedule although it asks for confirmation; "
               "without it such a tool's runs are refused and the schedule is paused.")


class Schedule(Model):
    id: Annotated[str, msgspec.Meta(description="The schedule's id.")]
    tool_id: Annotated[str, msgspec.Meta(description="Canonical id of the tool it runs, as tools/list gives it.")]
    cron: Annotated[str, msgspec.Meta(description=_CRON)]
    timezone: Annotated[str, msgspec.Meta(description=_TZ)]
    enabled: Annotated[bool, msgspec.Meta(description="Whether it fires (runNow works either way).")]
    missed: Annotated[Missed, msgspec.Meta(description=_MISSED)]
    allow_unattended: Annotated[bool, msgspec.Meta(description=_UNATTENDED)]
    source: Annotated[Literal["user", "manifest"], msgspec.Meta(description=(
        "'manifest': a tool's trigger in its toolset.yaml made it (an upgrade updates its cron and prompt, "
        "uninstall deletes it); 'user': schedules/create did."))]
    explained: Annotated[str, msgspec.Meta(description="The cron expression in words: 'At 09:00 on Monday "
                                                        "through Friday'.")]
    created_at: Annotated[str, msgspec.Meta(description="When it was created (UTC, ISO 8601).")]
    updated_at: Annotated[str, msgspec.Meta(description="When it last changed (UTC, ISO 8601).")]
    args: Annotated[dict[str, Any], msgspec.Meta(description="The tool's arguments for every run.")] = {}
    prompt: Annotated[str | None, msgspec.Meta(description=_PROMPT)] = None
    chat_id: Annotated[str | None, msgspec.Meta(description=_CHAT)] = None
    provider: Annotated[str | None, msgspec.Meta(description=_PROVIDER)] = None
    model: Annotated[str | None, msgspec.Meta(description=_MODEL)] = None
    paused_reason: Annotated[str | None, msgspec.Meta(description=(
        "Why it does not fire although enabled: its tool or chat was deleted, or its tool asks for confirmation "
        "and allowUnattended is off. schedules/update with the problem fixed (or enabled: true) resumes it."))] = None
    toolset_id: Annotated[str | None, msgspec.Meta(description="The toolset whose manifest declared it.")] = None
    next_run_at: Annotated[str | None, msgspec.Meta(description=(
        "When it fires next (UTC, ISO 8601); absent while disabled or paused."))] = None
    last_run_at: Annotated[str | None, msgspec.Meta(description="When it last ran (UTC, ISO 8601).")] = None
    last_tool_call_id: Annotated[str | None, msgspec.Meta(description="The tool call of its last run.")] = None
    last_status: Annotated[Literal["success", "error"] | None, msgspec.Meta(
        description="How its last run ended.")] = None
    last_error: Annotated[str | None, msgspec.Meta(description="What went wrong in its last run.")] = None


class CreateScheduleParams(Model):
    tool_id: Annotated[str, msgspec.Meta(description="Canonical id of the tool to run (any provider).")]
    cron: Annotated[str, msgspec.Meta(description=_CRON)]
    args: Annotated[dict[str, Any], msgspec.Meta(description=(
        "The tool's arguments, checked against its input schema now."))] = {}
    timezone: Annotated[str | None, msgspec.Meta(description=_TZ)] = None
    prompt: Annotated[Prompt | None, msgspec.Meta(description=_PROMPT)] = None
    chat_id: Annotated[str | None, msgspec.Meta(description=_CHAT)] = None
    provider: Annotated[str | None, msgspec.Meta(description=_PROVIDER)] = None
    model: Annotated[str | None, msgspec.Meta(description=_MODEL)] = None
    enabled: Annotated[bool, msgspec.Meta(description="Whether it fires.")] = True
    missed: Annotated[Missed, msgspec.Meta(description=_MISSED)] = "runOnce"
    allow_unattended: Annotated[bool, msgspec.Meta(description=_UNATTENDED)] = False


class UpdateScheduleParams(Model):
    id: Annotated[str, msgspec.Meta(description="The schedule to change; only the fields given change.")]
    tool_id: Annotated[str | msgspec.UnsetType, msgspec.Meta(description="Another tool.")] = msgspec.UNSET
    cron: Annotated[str | msgspec.UnsetType, msgspec.Meta(description=_CRON)] = msgspec.UNSET
    args: Annotated[dict[str, Any] | msgspec.UnsetType, msgspec.Meta(description="New arguments.")] = msgspec.UNSET
    timezone: Annotated[str | msgspec.UnsetType, msgspec.Meta(description=_TZ)] = msgspec.UNSET
    prompt: Annotated[Prompt | None | msgspec.UnsetType, msgspec.Meta(
        description=_PROMPT + " null removes it.")] = msgspec.UNSET
    chat_id: Annotated[str | None | msgspec.UnsetType, msgspec.Meta(
        description=_CHAT + " null: no chat.")] = msgspec.UNSET
    provider: Annotated[str | None | msgspec.UnsetType, msgspec.Meta(
        description=_PROVIDER + " null: the default.")] = msgspec.UNSET
    model: Annotated[str | None | msgspec.UnsetType, msgspec.Meta(
        description=_MODEL + " null: the default.")] = msgspec.UNSET
    enabled: Annotated[bool | msgspec.UnsetType, msgspec.Meta(description=(
        "Whether it fires; true also clears pausedReason once its tool and chat are there."))] = msgspec.UNSET
    missed: Annotated[Missed | msgspec.UnsetType, msgspec.Meta(description=_MISSED)] = msgspec.UNSET
    allow_unattended: Annotated[bool | msgspec.UnsetType, msgspec.Meta(description=_UNATTENDED)] = msgspec.UNSET


class ScheduleIdParams(Model):
    id: Annotated[str, msgspec.Meta(description="The schedule's id, as schedules/list gives it.")]


class ListSchedulesParams(Model):
    chat_id: Annotated[str | None, msgspec.Meta(description="Only the schedules posting to this chat.")] = None
    tool_id: Annotated[str | None, msgspec.Meta(description="Only the schedules of this tool.")] = None


class ScheduleResult(Model):
    schedule: Annotated[Schedule, msgspec.Meta(description="The schedule as stored now.")]


class SchedulesResult(Model):
    schedules: Annotated[list[Schedule], msgspec.Meta(description="Oldest first.")]


class RunNowResult(Model):
    tool_call: Annotated[ToolCall, msgspec.Meta(description=(
        "The run's tool call (also in the audit trail); with a chat, the turn it starts goes on after this "
        "answer and streams as chat/event notifications."))]


class FiredParams(Model):
    schedule_id: Annotated[str, msgspec.Meta(description="The schedule that ran.")]
    tool_call: Annotated[ToolCall, msgspec.Meta(description="Its tool call.")]
    message: Annotated[str, msgspec.Meta(description=(
        "The prompt with the tool's output (text, secrets masked): what a chat would have been sent."))]
    chat_id: Annotated[str | None, msgspec.Meta(description=(
        "Set when the run posted to a chat (its turn streams as chat/event notifications)."))] = None


_IP, _NF, _CF, _ST = ErrorCode.INVALID_PARAMS, ErrorCode.NOT_FOUND, ErrorCode.CONFLICT, ErrorCode.STORAGE_ERROR

SPECS = (
    MethodSpec("schedules/list", "clientToServer", "request",
               "The schedules, with when each fires next, how its last run ended and, if it is paused, why.",
               params=ListSchedulesParams, result=SchedulesResult, errors=(_IP, _ST)),
    MethodSpec("schedules/create", "clientToServer", "request",
               "Put a tool on a schedule. InvalidParams for a cron expression that is malformed, never fires "
               "('30 2 31 2 *') or has seconds, an unknown time zone, arguments its schema refuses, a tool that "
               "works on a chat's files without chatId, or a tool that asks for confirmation without "
               "allowUnattended; NotFound for an unknown tool or chat.",
               params=CreateScheduleParams, result=ScheduleResult, errors=(_IP, _NF, _ST)),
    MethodSpec("schedules/update", "clientToServer", "request",
               "Change a schedule: only the fields given change, checked as schedules/create checks them.",
               params=UpdateScheduleParams, result=ScheduleResult, errors=(_IP, _NF, _ST)),
    MethodSpec("schedules/delete", "clientToServer", "request",
               "Delete a schedule (a run in progress finishes). A manifest's schedule comes back only when its "
               "toolset is installed again; to keep it quiet, update it with enabled: false instead.",
               params=ScheduleIdParams, result=Empty, errors=(_NF, _ST)),
    MethodSpec("schedules/runNow", "clientToServer", "request",
               "Run a schedule once now, as it would fire (also when disabled; its next time does not move). "
               "Conflict while a run of it is in progress (runs of one schedule never overlap) or its tool is "
               "refused (disabled, not configured, tools switched off); NotFound if its tool or chat is gone.",
               params=ScheduleIdParams, result=RunNowResult, errors=(_NF, _CF, _IP, _ST)),
    MethodSpec("schedules/fired", "serverToClient", "notification",
               "A schedule ran (fired on time, at start for a missed run, or by runNow).",
               params=FiredParams),
)

"""Tool calls: tools/call and the call record it answers with, and toolCalls/*, the audit trail of
every call the sidecar made wherever it was started (a model in a chat, the "+" palette,
tools/call, a schedule), listed and exported with filters, secrets masked."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from .base import MethodSpec, Model
from .errors import ErrorCode
from .render_plans import RenderPlan

ExportFormat = Literal["jsonl", "csv"]
Provider = Literal["builtin", "python", "mcp", "http"]
Status = Literal["pending", "running", "success", "error"]

_TIME = ("An ISO 8601 date-time with a timezone (2026-11-23T10:00:00Z, 2026-11-23T11:00:00+01:00) or a "
         "date (2026-11-23, midnight UTC).")


_UTC = "ISO 8601 UTC ('2026-01-02T03:04:05.678901Z')"


class ClientContext(Model):
    """Where and when the user is, as the UI knows it; a Python tool reads it as
    get_context().telemetry (seed 004), every field present there, null when not given."""

    time: Annotated[Annotated[str, msgspec.Meta(max_length=64)] | None, msgspec.Meta(
        description="The user's current time, ISO 8601 (at most 64 characters); absent: the "
                    "sidecar's clock in UTC ('2026-01-02T03:04:05Z').")] = None
    timezone: Annotated[Annotated[str, msgspec.Meta(max_length=64)] | None, msgspec.Meta(
        description="The user's IANA time zone, e.g. 'Europe/Malta' (at most 64 characters); absent: the "
                    "sidecar's own when it can tell, else null.")] = None
    locale: Annotated[Annotated[str, msgspec.Meta(max_length=64)] | None, msgspec.Meta(
        description="The user's locale, a BCP 47 tag such as 'en-MT' (at most 64 characters); absent: null.")] = None
    language: Annotated[Annotated[str, msgspec.Meta(max_length=64)] | None, msgspec.Meta(
        description="The user's language, a BCP 47 tag such as 'en-US' (at most 64 characters); absent: "
                    "null.")] = None
    lat: Annotated[Annotated[float, msgspec.Meta(ge=-90, le=90)] | None, msgspec.Meta(
        description="The user's latitude in decimal degrees, -90 to 90; absent: null.")] = None
    lon: Annotated[Annotated[float, msgspec.Meta(ge=-180, le=180)] | None, msgspec.Meta(
        description="The user's longitude in decimal degrees, -180 to 180; absent: null.")] = None
    city: Annotated[Annotated[str, msgspec.Meta(max_length=200)] | None, msgspec.Meta(
        description="The user's city, as the UI names it (at most 200 characters); absent: null.")] = None
    country: Annotated[Annotated[str, msgspec.Meta(max_length=200)] | None, msgspec.Meta(
        description="The user's country, as the UI names it (at most 200 characters); absent: null.")] = None


class ToolCallParams(Model):
    tool_id: Annotated[str, msgspec.Meta(description=(
        "The canonical id, as tools/list gives it, or +slug / +slug@version as chat/invokeTool takes it."))]
    args: Annotated[dict[str, Any], msgspec.Meta(
        description="The tool's arguments, checked against its input schema first (InvalidParams naming the "
                    "field); default {}.")] = {}
    chat_id: Annotated[str | None, msgspec.Meta(
        description="The chat whose workspace the tool works in (NotFound if unknown), snapshotted after the "
                    "call; absent: no chat (a Python tool gets a scratch folder that is dropped after).")] = None
    work_done_token: Annotated[int | str | None, msgspec.Meta(
        description="When given, progress the tool reports (MCP tools do) comes as $/progress 'report's with "
                    "this token.")] = None
    client_context: Annotated[ClientContext | None, msgspec.Meta(
        description="The user's time, place and language for this call (a Python tool's "
                    "get_context().telemetry); absent: as if every field were left out.")] = None


class SentRequest(Model):
    method: Annotated[str, msgspec.Meta(description="The HTTP method.")]
    url: Annotated[str, msgspec.Meta(description="The URL as sent, every secret value in it masked (****).")]
    status: Annotated[int | None, msgspec.Meta(description=(
        "The final status (after retries and a followed redirect); absent when no answer came (refused, "
        "timed out, connection failed)."))] = None
    duration_ms: Annotated[float, msgspec.Meta(description="From the first attempt to the end of the answer.")] = 0.0


StartedBy = Literal["model", "palette", "api", "schedule"]
Confirmation = Literal["notNeeded", "userOnce", "userChat", "userAlways", "userDenied", "chatGrant",
                       "alwaysGrant", "schedule"]
_STARTED_BY = ("Who started the call: model (a model's tool call in a chat turn), palette (chat/invokeTool, "
               "the \"+\" palette), api (tools/call), schedule (a schedule ran it; scheduleId says which).")
_CONFIRMATION = (
    "How the call came to run, or not, where a confirmation applies (model and schedule calls): notNeeded "
    "(the tool requires none), userOnce / userChat / userAlways (the user allowed this call when asked, "
    "once / for the chat / always), userDenied (the user denied it), chatGrant / alwaysGrant (an earlier "
    "\"allow for this chat\" / \"always\" answer let it run without asking), schedule (the schedule allows "
    "it to run unattended). Absent when the user started the call themselves (palette, tools/call), and for "
    "a model's call refused before any question (unknown tool, bad arguments, the UI could not be asked).")


class ToolCall(Model):
    id: Annotated[str, msgspec.Meta(description="The call's id (a UUIDv7).")]
    tool_id: Annotated[str, msgspec.Meta(
        description="The canonical id of the tool called; for a model's call of a tool that does not exist, "
                    "the name the model used.")]
    args: Annotated[dict[str, Any], msgspec.Meta(
        description="The arguments it ran with (the user's edited ones when they changed them on "
                    "confirmation); {} when a model's arguments were not a JSON object.")]
    status: Annotated[Literal["pending", "running", "success", "error"], msgspec.Meta(
        description="'running', 'success' or 'error' (errorKind says why). 'pending' is never sent today. A call "
                    "still running when the sidecar stopped becomes error (errorKind interrupted) at the next "
                    "start.")]
    started_at: Annotated[str, msgspec.Meta(description="When it started (or was refused), " + _UTC + ".")]
    started_by: Annotated[StartedBy, msgspec.Meta(description=_STARTED_BY)]
    chat_id: Annotated[str | None, msgspec.Meta(
        description="The chat it ran in; absent for a call outside any chat (tools/call without chatId, a "
                    "schedule with no chat).")] = None
    message_id: Annotated[str | None, msgspec.Meta(
        description="The message it belongs to: a turn's assistant message or a palette run's tool message; "
                    "absent otherwise.")] = None
    result: Annotated[Any, msgspec.Meta(
        description="What the tool returned: a Python tool's return value, an MCP CallToolResult object, an "
                    "HTTP tool's response as declared. Also on some failures (what the tool left, e.g. an MCP "
                    "result with isError). Absent while running and when there is none.")] = None
    error: Annotated[str | None, msgspec.Meta(
        description="Why it failed, for the user and the model (secrets scrubbed); absent unless status is "
                    "error.")] = None
    error_kind: Annotated[str | None, msgspec.Meta(
        description="Why it failed, as a word: e.g. arguments, raised, timeout, crashed, memory, disk, output, "
                    "badOutput, server (an MCP tool's isError), upstream, refused, rate_limited, load, cancelled, "
                    "killed (tools switched off), interrupted (the sidecar stopped); for a model's call refused "
                    "before it ran also unknown_tool, denied, unavailable, unconfigured (the model is told which "
                    "keys) and tools_off. Absent unless status is error.")] = None
    render_plan: Annotated[RenderPlan | None, msgspec.Meta(
        description="How to show the result, told apart by renderer; absent: no renderer applies (show the raw "
                    "result), and while running.")] = None
    pre_manifest_id: Annotated[str | None, msgspec.Meta(
        description="In a chat: the workspace version the call started from; absent outside a chat, for a call "
                    "refused before it ran, or while the workspace never held a file.")] = None
    post_manifest_id: Annotated[str | None, msgspec.Meta(
        description="In a chat: the workspace version after the call (a new tool_run version when it changed "
                    "files, else the same as preManifestId); absent while running, outside a chat, for a call "
                    "refused before it ran, or while the workspace holds no file.")] = None
    finished_at: Annotated[str | None, msgspec.Meta(
        description="When it ended, " + _UTC + "; absent while running.")] = None
    requests: Annotated[list[SentRequest] | None, msgspec.Meta(description=(
        "HTTP tools: the requests the call made, in order (steps and failed ones included), secrets masked."))] = None
    duration_ms: Annotated[float | None, msgspec.Meta(description=(
        "How long the call ran, in milliseconds, from its start (after waiting for the chat's workspace) to "
        "its end, the workspace snapshot included; absent while it runs and for a call refused before it "
        "ran."))] = None
    schedule_id: Annotated[str | None, msgspec.Meta(
        description="The schedule that ran it (startedBy schedule).")] = None
    confirmation: Annotated[Confirmation | None, msgspec.Meta(description=_CONFIRMATION)] = None
    toolset_id: Annotated[str | None, msgspec.Meta(description=(
        "The toolset the tool belonged to when it ran (kept after the toolset is gone); absent for built-ins "
        "and a call of an unknown tool."))] = None
    provider: Annotated[str | None, msgspec.Meta(description=(
        "What ran the tool: builtin, python, mcp or http; absent for a call of an unknown tool."))] = None


class ToolCallResult(Model):
    tool_call: Annotated[ToolCall, msgspec.Meta(
        description="The call as it ended; a tool that ran and failed answers here too, with status error.")]


CALL_SPECS = (
    MethodSpec("tools/call", "clientToServer", "request",
               "Run one tool now, as the user (no confirmation is asked). With chatId it runs in "
               "that chat's workspace, which is snapshotted after the call, even a failed one. A "
               "tool that runs and fails still answers with its toolCall (status error, errorKind "
               "says why); bad arguments are InvalidParams before anything runs, and a tool whose "
               "status is available (required config missing) is Conflict (reason \"not configured\", "
               "data.missing names the keys) before anything runs.",
               params=ToolCallParams, result=ToolCallResult,
               errors=(ErrorCode.NOT_FOUND, ErrorCode.INVALID_PARAMS, ErrorCode.CONFLICT, ErrorCode.STORAGE_ERROR),
               cancel="interrupt"),
)


class ToolCallFilter(Model):
    """Which calls: every field given must match (all of them: AND); none given, every call."""

    chat_id: Annotated[str | None, msgspec.Meta(description="Calls made in this chat.")] = None
    toolset_id: Annotated[str | None, msgspec.Meta(description=(
        "Calls of this toolset's tools (as it was when they ran; also after it was uninstalled)."))] = None
    tool_id: Annotated[str | None, msgspec.Meta(description="Calls of this tool, by its canonical id.")] = None
    provider: Annotated[Provider | None, msgspec.Meta(description="Calls of tools of this kind.")] = None
    status: Annotated[Status | None, msgspec.Meta(description=(
        "success or error (a finished call); running for calls in a chat still running."))] = None
    started_by: Annotated[StartedBy | None, msgspec.Meta(description=(
        "model, palette (chat/invokeTool), api (tools/call) or schedule."))] = None
    schedule_id: Annotated[str | None, msgspec.Meta(description="Calls this schedule ran.")] = None
    confirmation: Annotated[Confirmation | None, msgspec.Meta(description=(
        "How the call was confirmed (see toolCall.confirmation), e.g. userDenied for the calls the user "
        "refused."))] = None
    since: Annotated[str | None, msgspec.Meta(description="Calls started at or after this time. " + _TIME)] = None
    until: Annotated[str | None, msgspec.Meta(description="Calls started before this time. " + _TIME)] = None


class ListToolCallsParams(ToolCallFilter, kw_only=True):
    page_size: Annotated[int, msgspec.Meta(ge=1, le=500, description="Calls per page, newest first (1-500).")] = 50
    page_token: Annotated[str | None, msgspec.Meta(description=(
        "nextPageToken of the previous page, with the same filters; absent for the first page. Pages "
        "hold still while calls are added: a page never repeats or skips a call."))] = None
    with_results: Annotated[bool, msgspec.Meta(description=(
        "Include each call's result and render plan (masked like the rest). Off by default: results "
        "can be large and a list view rarely shows them."))] = False


class ToolCallsResult(Model):
    tool_calls: Annotated[list[ToolCall], msgspec.Meta(description=(
        "Newest first: durationMs, status and errorKind say how each went; arguments, results, errors "
        "and request URLs with every secret masked (****): values the sidecar knows to be secret "
        "(stored secrets, tool config, keys), values named like one (an argument called token, "
        "password, apiKey...; so one called code or key shows masked too) and values shaped like one "
        "(sk-..., a JWT, Bearer ..., ?token=...)."))]
    next_page_token: Annotated[str | None, msgspec.Meta(description=(
        "Pass it as pageToken for the next page; absent on the last page."))] = None


class ExportToolCallsParams(ToolCallFilter, kw_only=True):
    path: Annotated[str, msgspec.Meta(description=(
        "Where to write: an absolute path to a file (not a folder) in a folder that exists, outside the "
        "sidecar's data directory. A file there is replaced whole; a failed export leaves it as it was."))]
    format: Annotated[ExportFormat | None, msgspec.Meta(description=(
        "jsonl (one toolCall object a line, with its result) or csv (one row a call, a header row "
        "first; args and result as JSON text). Default: csv when path ends in .csv, else jsonl."))] = None
    work_done_token: Annotated[int | str | None, msgspec.Meta(description=(
        "Report progress as $/progress under this token: begin, a report after each 500 calls written and "
        "after the last (percentage, message \"N of M calls\"), end."))] = None


class ExportToolCallsResult(Model):
    path: Annotated[str, msgspec.Meta(description="The file written.")]
    count: Annotated[int, msgspec.Meta(description="How many calls it holds.")]
    format: Annotated[ExportFormat, msgspec.Meta(description="The format written.")]


_IP, _ST = ErrorCode.INVALID_PARAMS, ErrorCode.STORAGE_ERROR

SPECS = (
    MethodSpec("toolCalls/list", "clientToServer", "request",
               "The audit trail: tool calls, newest first, filtered and paged, secrets masked. A call "
               "outside a chat shows from the moment its reply is sent.",
               params=ListToolCallsParams, result=ToolCallsResult, errors=(_IP, _ST)),
    MethodSpec("toolCalls/export", "clientToServer", "request",
               "Write the calls the filters select (oldest first; by default every call started before "
               "this request) to a file as JSON Lines or CSV, secrets masked as toolCalls/list masks "
               "them. Written to a temporary file beside the target and renamed over it at the end. "
               "InvalidParams (data.path params.path) for a relative path, a folder, a folder that does "
               "not exist or cannot be written, or a path in the data directory; StorageError when the "
               "disk refuses the write.",
               params=ExportToolCallsParams, result=ExportToolCallsResult, errors=(_IP, _ST),
               cancel="interrupt"),
)

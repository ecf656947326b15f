"""toolCalls/*: the audit trail. Every tool call the sidecar made, wherever it was started (a
model in a chat, the "+" palette, tools/call, a schedule), listed and exported with filters,
secrets masked."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from .base import MethodSpec, Model
from .errors import ErrorCode
from .toolsets import Confirmation, StartedBy, ToolCall

ExportFormat = Literal["jsonl", "csv"]
Provider = Literal["builtin", "python", "mcp", "http"]
Status = Literal["pending", "running", "success", "error"]

_TIME = ("An ISO 8601 date-time with a timezone (2026-11-23T10:00:00Z, 2026-11-23T11:00:00+01:00) or a "
         "date (2026-11-23, midnight UTC).")


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

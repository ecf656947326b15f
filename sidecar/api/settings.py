"""The user's settings: read whole, changed a field at a time. The first one is the kill switch
(seed 004 "Safety Guardrails"); a setting added later is one more field in each Struct here.

The tool-selection fields (issue 28) say which tools a chat turn offers the model; a chat may
override each of them (chats/update), the rest comes from here."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from .base import MethodSpec, Model
from .errors import ErrorCode

_TOOLS_ENABLED = (
    "The kill switch. false: every tool call is refused at once with PermissionDenied (data.reason "
    "'toolsOff'), from tools/call, chat/invokeTool, a model in a chat turn or a schedule; calls running when "
    "it goes off are stopped and recorded as errors with errorKind 'killed'; chat turns go on without tools "
    "(the model is offered none and is told tools are off); schedules pause. Kept across restarts; "
    "initialize (capabilities.toolsEnabled) and debug/info report it. Default true.")

ToolSelectionMode = Literal["all", "auto", "relevant"]

TOOL_SELECTION = (
    "Which tools a chat turn offers the model. 'all': every enabled tool (and what the branch attached), "
    "as many as the provider takes per request (its config.maxTools; above it, as 'relevant'). 'auto' "
    "(default): every tool while their definitions fit the budget (toolBudgetTokens and toolBudgetCount), "
    "else as 'relevant'. 'relevant': the pinned tools, the tools of what the branch attached, the built-ins "
    "(keepBuiltins) and the relevantTools best ranked for the recent user messages, plus a find_tools tool "
    "through which the model loads more within the turn (or the provider's own deferred loading: Anthropic's "
    "tool search, see providers/set config.toolSearch). The kill switch and each tool's enabled rule over "
    "all of it: a disabled tool is never offered, pinned or not.")
TOOL_BUDGET_TOKENS = (
    "'auto' offers every tool while their definitions take at most this many tokens (estimated: the JSON "
    "of each definition as sent, name, description and input schema, at 4 characters a token). null "
    "(default): 10% of the model's context window (the provider's config.contextWindow). 0: always select.")
TOOL_BUDGET_COUNT = ("'auto' offers every tool while there are at most this many (default 40); above, it "
                     "selects. 0: always select.")
RELEVANT_TOOLS = ("How many of the best-ranked tools a selecting turn offers besides the kept ones, at most (K, "
                  "default 8): they join best first while the offer's definitions stay within 2,000 tokens (or "
                  "toolBudgetTokens when smaller), the best-ranked one always.")
PINNED_TOOLS = ("Tool ids always offered when a turn selects (up to the provider's cap). A pinned id that "
                "names no tool, or a disabled one, is not offered (and no error): it may come back later.")
KEEP_BUILTINS = "Whether a selecting turn always offers the built-in tools (files, shell). Default true."

MAX_PINNED = 256
MAX_K = 64
MAX_BUDGET_TOKENS = 10_000_000
MAX_BUDGET_COUNT = 10_000

NonNegTokens = Annotated[int, msgspec.Meta(ge=0, le=MAX_BUDGET_TOKENS)]
NonNegCount = Annotated[int, msgspec.Meta(ge=0, le=MAX_BUDGET_COUNT)]
TopK = Annotated[int, msgspec.Meta(ge=0, le=MAX_K)]
PinnedIds = Annotated[list[Annotated[str, msgspec.Meta(min_length=1, max_length=512)]],
                      msgspec.Meta(max_length=MAX_PINNED)]


class UserSettings(Model, omit_defaults=False):
    """Every setting, each with its value, defaults included (a UI shows them all)."""

    tools_enabled: Annotated[bool, msgspec.Meta(description=_TOOLS_ENABLED)]
    tool_selection: Annotated[ToolSelectionMode, msgspec.Meta(description=TOOL_SELECTION)] = "auto"
    tool_budget_tokens: Annotated[int | None, msgspec.Meta(description=TOOL_BUDGET_TOKENS)] = None
    tool_budget_count: Annotated[int, msgspec.Meta(description=TOOL_BUDGET_COUNT)] = 40
    relevant_tools: Annotated[int, msgspec.Meta(description=RELEVANT_TOOLS)] = 8
    pinned_tools: Annotated[list[str], msgspec.Meta(description=PINNED_TOOLS)] = []
    keep_builtins: Annotated[bool, msgspec.Meta(description=KEEP_BUILTINS)] = True


class SettingsResult(Model):
    settings: Annotated[UserSettings, msgspec.Meta(description="Every setting, with its current value.")]


_LEFT_OUT = " Left out: unchanged."


class SetSettingsParams(Model):
    tools_enabled: Annotated[bool | msgspec.UnsetType, msgspec.Meta(
        description="Turn every tool on (true) or off (false). Left out: unchanged.")] = msgspec.UNSET
    tool_selection: Annotated[ToolSelectionMode | msgspec.UnsetType, msgspec.Meta(
        description="all, auto or relevant (see UserSettings.toolSelection)." + _LEFT_OUT)] = msgspec.UNSET
    tool_budget_tokens: Annotated[NonNegTokens | None | msgspec.UnsetType, msgspec.Meta(
        description="Tokens of definitions 'auto' offers whole; null: 10% of the context window." + _LEFT_OUT)
    ] = msgspec.UNSET
    tool_budget_count: Annotated[NonNegCount | msgspec.UnsetType, msgspec.Meta(
        description="Tools 'auto' offers whole at most." + _LEFT_OUT)] = msgspec.UNSET
    relevant_tools: Annotated[TopK | msgspec.UnsetType, msgspec.Meta(
        description="K, 0-64: the best-ranked tools a selecting turn offers." + _LEFT_OUT)] = msgspec.UNSET
    pinned_tools: Annotated[PinnedIds | msgspec.UnsetType, msgspec.Meta(
        description="Tool ids always offered (replaces the list; at most 256)." + _LEFT_OUT)] = msgspec.UNSET
    keep_builtins: Annotated[bool | msgspec.UnsetType, msgspec.Meta(
        description="Whether a selecting turn always offers the built-ins." + _LEFT_OUT)] = msgspec.UNSET


class SettingsChangedParams(Model):
    settings: Annotated[UserSettings, msgspec.Meta(description="Every setting, after the change.")]
    changed: Annotated[list[str], msgspec.Meta(
        description="The settings that changed, by their wire names (e.g. ['toolsEnabled']).")]


SPECS = (
    MethodSpec("settings/get", "clientToServer", "request", "The user's settings (toolsEnabled, toolSelection, ...).",
               result=SettingsResult, errors=(ErrorCode.STORAGE_ERROR,)),
    MethodSpec("settings/set", "clientToServer", "request",
               "Change the settings given; the others keep their values. Takes effect at once and is stored: "
               "toolsEnabled false refuses new tool calls and stops the running ones before the answer; the "
               "tool-selection settings apply from the next model call of any turn. Every "
               "change is announced with settings/changed (also to the client that made it). StorageError when "
               "it could not be stored (switching tools off still holds until the sidecar stops).",
               params=SetSettingsParams, result=SettingsResult,
               errors=(ErrorCode.INVALID_PARAMS, ErrorCode.STORAGE_ERROR)),
    MethodSpec("settings/changed", "serverToClient", "notification",
               "A setting changed (by settings/set, from this client or another way).",
               params=SettingsChangedParams),
)

"""Which tools each model call of a turn is offered (issue 28; seed 004 "Tool Execution Flow"
steps 1-2; seed 002 "Pending": a maximum number of tools).

Below a budget the model gets every tool of the chat's box (``toolbox``), as before. Above it (or
with ``toolSelection: relevant``) it gets the kept tools (pinned by the user, attached by the
branch, the built-ins, those the branch loaded in earlier turns) and the best-ranked ones for the
recent user text (``tools.ranking.Ranker``), plus either ``find_tools``, this turn's own tool that
loads more definitions into the next call, or, where the provider has it (Anthropic), the rest as
deferred definitions its own tool search loads. A provider's cap on tools per request
(``ToolLimits.max_tools``) is never exceeded, whatever else says so.

Token counts are estimates: the JSON of each definition as the providers are sent it (name,
description, input schema) at ``CHARS_PER_TOKEN`` characters a token, the usual rule of thumb for
English and JSON with the GPT and Claude tokenizers; no tokenizer is loaded for a budget.
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..store.chats import MessageRow
from ..store.settings import TOOL_SELECTION_KEYS, SettingsRepo
from ..tools.ranking import Ranker
from .providers.base import ToolLimits, ToolSpec
from .toolbox import ChatTool, ToolBox

if TYPE_CHECKING:
    from ..store import Database

CHARS_PER_TOKEN = 4
BUDGET_SHARE = 0.10  # of the context window, when no token budget is set
# What a selected offer's definitions may cost, find_tools included (or the token budget, when
# smaller): the ranked tools join best first while they fit, the best one always. Past ~2k tokens
# the tools a turn does not use cost more than a find_tools step that loads them when needed.
SELECTED_TOKENS = 2000
FIND_TOOLS = "find_tools"  # kept from every catalog tool's alias (toolbox.RESERVED_ALIASES)
MAX_FIND_CALLS = 5  # find_tools answers per turn; then it says to go on with what is loaded
FIND_LIMIT = 10  # definitions one find_tools answer loads at most
RECENT_USER_MESSAGES = 3  # what a turn's ranking reads: the last few things the user said
RECENT_CHARS = 4000
MAX_QUERY_CHARS = 1000

FIND_TOOLS_SPEC = ToolSpec(
    FIND_TOOLS,
    "Search the user's other tools by what you need them for and load the best matches: their "
    "definitions are given to you in your next step, and you can call them then. Use it when none of "
    "your tools fits; describe the task in a few words.",
    {"type": "object", "properties": {
        "query": {"type": "string", "description": "What the tool should do, in a few words"},
        "limit": {"type": "integer", "minimum": 1, "maximum": FIND_LIMIT,
                  "description": f"How many tools to load (default 5, at most {FIND_LIMIT})"}},
     "required": ["query"]})


@dataclass(frozen=True, slots=True)
class Selection:
    """The effective tool-selection settings of one turn (the user's, then the chat's own)."""

    mode: str = "auto"
    budget_tokens: int | None = None
    budget_count: int = 40
    k: int = 8
    pinned: tuple[str, ...] = ()
    keep_builtins: bool = True

    @classmethod
    def of(cls, *layers: Mapping[str, Any]) -> Selection:
        """From wire-named values, later layers winning; a None value is no opinion."""
        merged: dict[str, Any] = {}
        for layer in layers:
            merged.update({k: v for k, v in layer.items() if v is not None and k in TOOL_SELECTION_KEYS})
        d = cls()
        return cls(mode=merged.get("toolSelection", d.mode), budget_tokens=merged.get("toolBudgetTokens"),
                   budget_count=merged.get("toolBudgetCount", d.budget_count),
                   k=merged.get("relevantTools", d.k), pinned=tuple(merged.get("pinnedTools") or ()),
                   keep_builtins=merged.get("keepBuiltins", d.keep_builtins))

    def wire(self) -> dict[str, Any]:
        return {"toolSelection": self.mode, "toolBudgetTokens": self.budget_tokens,
                "toolBudgetCount": self.budget_count, "relevantTools": self.k, "pinnedTools": list(self.pinned),
                "keepBuiltins": self.keep_builtins}


class SelectionSettings:
    """The user's tool-selection settings: read once at start, stored on each change (one row
    per setting, as the kill switch)."""

    def __init__(self, repo: SettingsRepo, values: dict[str, Any]) -> None:
        self.repo = repo
        self.current = Selection.of(values)

    @classmethod
    async def load(cls, db: Database) -> SelectionSettings:
        return cls(SettingsRepo(db), await SettingsRepo(db).load())

    async def set(self, values: dict[str, Any]) -> list[str]:
        """Store the wire-named values given; the names of those that changed."""
        before = self.current.wire()
        changed = [k for k, v in values.items() if before.get(k) != v]
        if changed:
            await self.repo.save({k: values[k] for k in changed})
            # A None (toolBudgetTokens back to the share of the context) is no opinion: the default.
            self.current = Selection.of({**before, **values})
        return changed


def spec_tokens(spec: ToolSpec) -> int:
    """Estimated tokens of one definition as sent (see the module's note)."""
    text = json.dumps({"name": spec.name, "description": spec.description, "input_schema": spec.input_schema},
                      ensure_ascii=False, separators=(",", ":"))
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def spec_of(t: ChatTool, *, deferred: bool = False) -> ToolSpec:
    return ToolSpec(t.alias, t.tool.description or t.display, t.tool.input_schema or {"type": "object"},
                    t.tool.id, deferred)


def recent_text(path: list[MessageRow]) -> str:
    """What the user said last (a few messages), the text a turn's tools are ranked on."""
    said = [m.content for m in path if m.role == "user" and m.content][-RECENT_USER_MESSAGES:]
    return "\n".join(said)[-RECENT_CHARS:]


def loaded_before(path: list[MessageRow], most: int) -> list[str]:
    """Tools the branch's earlier turns loaded (find_tools, a tool search, a tool named): they stay
    offered, the latest first, so a model does not lose a tool it found a message ago."""
    found: list[str] = []
    for msg in reversed(path):
        for step in reversed(stored(msg)):
            for tool_id in step.get("loaded") or ():
                if tool_id not in found:
                    found.append(tool_id)
    return found[:most]


def stored(msg: MessageRow) -> list[dict[str, Any]]:
    """The message's stored offers, one per model call ([] for none, or what no longer decodes)."""
    if msg.role != "assistant" or not msg.tools_offered:
        return []
    try:
        steps = json.loads(msg.tools_offered)
    except ValueError:
        return []
    return [s for s in steps if isinstance(s, dict)] if isinstance(steps, list) else []


@dataclass
class Offer:
    """One turn's offer, as it grows from call to call."""

    box: ToolBox
    limits: ToolLimits
    ranker: Ranker
    offered: list[ChatTool]  # sent whole, in order
    deferred: list[ChatTool]  # sent for the provider's own tool search to load
    reason: str
    find: bool  # find_tools is offered
    find_calls: int = 0
    loaded: list[str] = field(default_factory=list[str])  # ids loaded during the turn
    _ids: set[str] = field(default_factory=set[str])

    def __post_init__(self) -> None:
        self._ids = {t.tool.id for t in self.offered}

    @property
    def room(self) -> int:
        """Tools more the next request may carry whole (its cap less what it holds)."""
        if self.limits.max_tools is None:
            return 1 << 30
        return self.limits.max_tools - len(self.offered) - len(self.deferred) - (1 if self.find or self.deferred else 0)

    def specs(self) -> list[ToolSpec]:
        specs = [spec_of(t) for t in self.offered] + [spec_of(t, deferred=True) for t in self.deferred]
        return specs + [FIND_TOOLS_SPEC] if self.find else specs

    def tokens(self) -> int:
        return sum(spec_tokens(s) for s in self.specs() if not s.deferred)

    def record(self) -> dict[str, Any]:
        """The toolsOffered event's fields, and what the message keeps (with the deferred ids and
        what this turn loaded, for a replay and for the turns after)."""
        return {"toolIds": [t.tool.id for t in self.offered], "deferred": len(self.deferred), "reason": self.reason,
                "findTools": self.find, "deferredIds": [t.tool.id for t in self.deferred],
                "loaded": list(self.loaded)}

    def is_find(self, name: str) -> bool:
        return self.find and name == FIND_TOOLS

    def lookup(self, name: str) -> ChatTool | None:
        """The offered or deferred tool the model named (a deferred one it called is loaded)."""
        chosen = self.box.by_alias.get(name)
        if chosen is None:
            return None
        if chosen.tool.id in self._ids:
            return chosen
        if any(t is chosen for t in self.deferred):
            self.deferred = [t for t in self.deferred if t is not chosen]
            self._take([chosen], "found", force=True)
            return chosen
        return None

    def named(self, name: str) -> ChatTool | None:
        """A tool of the box the model named though it was not offered (by its alias, or its id as a
        model may have seen it in an earlier turn): loaded, so it is called rather than refused."""
        chosen = self.box.by_alias.get(name) or next((t for t in self.box.tools if t.tool.id == name), None)
        if chosen is not None and chosen.tool.id not in self._ids:
            self._take([chosen], "named")
        return chosen

    def loaded_by_search(self, names: Iterable[str]) -> None:
        """The provider's tool search brought these (by alias) into its context: whole from now on."""
        waiting = {t.tool.id for t in self.deferred}
        found = [t for n in names if (t := self.box.by_alias.get(n)) is not None and t.tool.id in waiting]
        taken = {t.tool.id for t in found}
        self.deferred = [t for t in self.deferred if t.tool.id not in taken]
        self._take(found, "found", force=True)

    async def find_answer(self, arguments: dict[str, Any] | None) -> tuple[str, bool, list[str]]:
        """(text, is_error, loaded ids) of one find_tools call."""
        if self.find_calls >= MAX_FIND_CALLS:
            return (f"find_tools has been asked {MAX_FIND_CALLS} times in this turn, its limit: go on with the "
                    "tools you have, or tell the user which tool is missing."), True, []
        self.find_calls += 1
        query = (arguments or {}).get("query")
        if not isinstance(query, str) or not query.strip():
            return "find_tools needs a query: what the tool should do, in a few words.", True, []
        limit = (arguments or {}).get("limit", 5)
        limit = limit if isinstance(limit, int) and not isinstance(limit, bool) and 1 <= limit <= FIND_LIMIT else 5
        rest = [t.tool.id for t in self.box.tools if t.tool.id not in self._ids]
        if not rest:
            return "Every tool is loaded already: there is nothing more to find.", False, []
        room = self.room
        if room <= 0:
            return (f"No more tools can be loaded: the provider takes at most {self.limits.max_tools} per request. "
                    "Go on with the tools you have."), True, []
        ranked = await self.ranker.rank(query[:MAX_QUERY_CHARS], limit=min(limit, room), tool_ids=rest)
        by_id = {t.tool.id: t for t in self.box.tools}
        found = [by_id[r.tool_id] for r in ranked if r.tool_id in by_id and r.tool_id not in self._ids]
        if not found:
            return f"No tool matched {query[:200]!r}. Try other words, or go on without.", False, []
        self._take(found, "found")
        lines = [f"- {t.alias}: {_short(t.tool.description or t.display)}" for t in found]
        return ("Loaded; you can call these from your next step:\n" + "\n".join(lines)), False, \
            [t.tool.id for t in found]

    def _take(self, tools: list[ChatTool], reason: str, *, force: bool = False) -> None:
        """Offer these from the next call on, as far as the cap allows (``force``: they were deferred,
        so they took a place in the request already)."""
        room = self.room
        for t in tools:
            if t.tool.id in self._ids or (not force and room <= 0):
                continue
            self.offered.append(t)
            self._ids.add(t.tool.id)
            self.loaded.append(t.tool.id)
            room -= 0 if force else 1
            self.reason = reason


def _short(text: str, most: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= most else text[:most - 1] + "…"


def budget_of(selection: Selection, limits: ToolLimits) -> int:
    if selection.budget_tokens is not None:
        return selection.budget_tokens
    return int(limits.context_window * BUDGET_SHARE)


async def choose(box: ToolBox, selection: Selection, limits: ToolLimits, ranker: Ranker, text: str, *,
                 kept: Collection[str] = (), replay: dict[str, Any] | None = None) -> Offer:
    """The first call's offer. ``kept``: ids the branch loaded before (``loaded_before``);
    ``replay``: a stored offer (``record()``) to give again."""
    cap = limits.max_tools if limits.max_tools is not None else 1 << 30
    tools = box.tools
    if replay is not None:
        return _replayed(box, limits, ranker, replay, cap)
    if selection.mode == "all" and len(tools) <= cap:
        return Offer(box, limits, ranker, list(tools), [], "all", False)
    if selection.mode == "auto" and len(tools) <= min(cap, selection.budget_count):
        if sum(spec_tokens(spec_of(t)) for t in tools) <= budget_of(selection, limits):
            return Offer(box, limits, ranker, list(tools), [], "all", False)
    reason = "relevant" if selection.mode == "relevant" else "budget" if len(tools) <= cap else "cap"
    allowance = min(SELECTED_TOKENS, budget_of(selection, limits))
    chosen = await _selected(box, selection, ranker, text, kept, allowance)
    left = [t for t in tools if t.tool.id not in {c.tool.id for c in chosen}]
    native = limits.tool_search is not None and bool(left)
    # One place for find_tools (or the provider's search tool) when anything is left out.
    whole = chosen[:max(0, cap - 1)] if left or len(chosen) > cap else chosen
    ids = {t.tool.id for t in whole}
    left = [t for t in tools if t.tool.id not in ids]
    if native:
        return Offer(box, limits, ranker, whole, left[:max(0, cap - len(whole) - 1)], reason, False)
    return Offer(box, limits, ranker, whole, [], reason, bool(left))


async def _selected(box: ToolBox, selection: Selection, ranker: Ranker, text: str,
                    kept: Collection[str], allowance: int) -> list[ChatTool]:
    """The kept tools (pinned, attached, built-ins, loaded before), then the best-ranked K while
    the whole offer's definitions fit ``allowance`` tokens (the best-ranked one always)."""
    tools = box.tools
    by_id = {t.tool.id: t for t in tools}
    first: dict[str, ChatTool] = {}
    for tool_id in selection.pinned:  # a pinned id that names nothing here (gone, disabled) is passed over
        if tool_id in by_id:
            first[tool_id] = by_id[tool_id]
    for t in tools:
        if t.attached or (selection.keep_builtins and t.tool.provider == "builtin"):
            first.setdefault(t.tool.id, t)
    for tool_id in kept:
        if tool_id in by_id:
            first.setdefault(tool_id, by_id[tool_id])
    rest = [t.tool.id for t in tools if t.tool.id not in first]
    if rest and selection.k > 0 and text.strip():
        tokens = spec_tokens(FIND_TOOLS_SPEC) + sum(spec_tokens(spec_of(t)) for t in first.values())
        ranked = [by_id[r.tool_id] for r in await ranker.rank(text, limit=selection.k, tool_ids=rest)
                  if r.tool_id in by_id]
        for n, t in enumerate(ranked):
            cost = spec_tokens(spec_of(t))
            if n and tokens + cost > allowance:
                break
            first.setdefault(t.tool.id, t)
            tokens += cost
    return list(first.values())


def _replayed(box: ToolBox, limits: ToolLimits, ranker: Ranker, replay: dict[str, Any], cap: int) -> Offer:
    by_id = {t.tool.id: t for t in box.tools}
    whole = [by_id[i] for i in replay.get("toolIds") or () if i in by_id]
    deferred = [by_id[i] for i in replay.get("deferredIds") or () if i in by_id] if limits.tool_search else []
    left = len(box.tools) > len(whole) + len(deferred)
    find = bool(replay.get("findTools")) and left and not deferred
    whole = whole[:max(0, cap - (1 if find or deferred else 0))]
    return Offer(box, limits, ranker, whole, deferred[:max(0, cap - len(whole) - 1)], "replay", find)

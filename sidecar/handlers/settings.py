"""settings/*: the user's settings, read whole and changed a field at a time."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import msgspec

from ..api.settings import SetSettingsParams, SettingsResult, UserSettings
from ..chat.offer import SelectionSettings
from ..rpc import RequestContext
from ..tools.switch import ToolSwitch
from .routes import method

OnSelection = Callable[[list[str]], Awaitable[None]]


def current(switch: ToolSwitch, selection: SelectionSettings) -> UserSettings:
    s = selection.current
    return UserSettings(tools_enabled=switch.enabled, tool_selection=s.mode,  # type: ignore[arg-type]
                        tool_budget_tokens=s.budget_tokens, tool_budget_count=s.budget_count, relevant_tools=s.k,
                        pinned_tools=list(s.pinned), keep_builtins=s.keep_builtins)


class SettingsHandlers:
    def __init__(self, switch: ToolSwitch, selection: SelectionSettings, on_selection: OnSelection) -> None:
        self.switch = switch
        self.selection = selection
        self.on_selection = on_selection  # settings/changed for the tool-selection fields

    @method("settings/get")
    async def get(self, p: None, ctx: RequestContext) -> SettingsResult:
        return SettingsResult(current(self.switch, self.selection))

    @method("settings/set")
    async def set(self, p: SetSettingsParams, ctx: RequestContext) -> SettingsResult:
        if p.tools_enabled is not msgspec.UNSET:
            await self.switch.set(p.tools_enabled)
        given = {name: value for name, value in msgspec.structs.asdict(p).items()
                 if name != "tools_enabled" and value is not msgspec.UNSET}
        wire = {_WIRE[name]: value for name, value in given.items()}
        changed = await self.selection.set(wire)
        if changed:
            await self.on_selection(changed)
        return SettingsResult(current(self.switch, self.selection))


_WIRE = {"tool_selection": "toolSelection", "tool_budget_tokens": "toolBudgetTokens",
         "tool_budget_count": "toolBudgetCount", "relevant_tools": "relevantTools", "pinned_tools": "pinnedTools",
         "keep_builtins": "keepBuiltins"}

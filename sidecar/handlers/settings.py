"""settings/*: the user's settings, read whole and changed a field at a time."""

from __future__ import annotations

import msgspec

from ..api.settings import SetSettingsParams, SettingsResult, UserSettings
from ..rpc import RequestContext
from ..tools.switch import ToolSwitch
from .routes import method


def current(switch: ToolSwitch) -> UserSettings:
    return UserSettings(tools_enabled=switch.enabled)


class SettingsHandlers:
    def __init__(self, switch: ToolSwitch) -> None:
        self.switch = switch

    @method("settings/get")
    async def get(self, p: None, ctx: RequestContext) -> SettingsResult:
        return SettingsResult(current(self.switch))

    @method("settings/set")
    async def set(self, p: SetSettingsParams, ctx: RequestContext) -> SettingsResult:
        if p.tools_enabled is not msgspec.UNSET:
            await self.switch.set(p.tools_enabled)
        return SettingsResult(current(self.switch))

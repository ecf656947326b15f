"""The user's settings: read whole, changed a field at a time. The first one is the kill switch
(seed 004 "Safety Guardrails"); a setting added later is one more field in each Struct here."""

from __future__ import annotations

from typing import Annotated

import msgspec

from .base import MethodSpec, Model
from .errors import ErrorCode

_TOOLS_ENABLED = (
    "The kill switch. false: every tool call is refused at once with PermissionDenied (data.reason "
    "'toolsOff'), from tools/call, chat/invokeTool, a model in a chat turn or a schedule; calls running when "
    "it goes off are stopped and recorded as errors with errorKind 'killed'; chat turns go on without tools "
    "(the model is offered none and is told tools are off); schedules pause. Kept across restarts; "
    "initialize (capabilities.toolsEnabled) and debug/info report it. Default true.")


class UserSettings(Model):
    tools_enabled: Annotated[bool, msgspec.Meta(description=_TOOLS_ENABLED)]


class SettingsResult(Model):
    settings: Annotated[UserSettings, msgspec.Meta(description="Every setting, with its current value.")]


class SetSettingsParams(Model):
    tools_enabled: Annotated[bool | msgspec.UnsetType, msgspec.Meta(
        description="Turn every tool on (true) or off (false). Left out: unchanged.")] = msgspec.UNSET


class SettingsChangedParams(Model):
    settings: Annotated[UserSettings, msgspec.Meta(description="Every setting, after the change.")]
    changed: Annotated[list[str], msgspec.Meta(
        description="The settings that changed, by their wire names (e.g. ['toolsEnabled']).")]


SPECS = (
    MethodSpec("settings/get", "clientToServer", "request", "The user's settings (toolsEnabled, ...).",
               result=SettingsResult, errors=(ErrorCode.STORAGE_ERROR,)),
    MethodSpec("settings/set", "clientToServer", "request",
               "Change the settings given; the others keep their values. Takes effect at once and is stored: "
               "toolsEnabled false refuses new tool calls and stops the running ones before the answer. Every "
               "change is announced with settings/changed (also to the client that made it). StorageError when "
               "it could not be stored (switching tools off still holds until the sidecar stops).",
               params=SetSettingsParams, result=SettingsResult,
               errors=(ErrorCode.INVALID_PARAMS, ErrorCode.STORAGE_ERROR)),
    MethodSpec("settings/changed", "serverToClient", "notification",
               "A setting changed (by settings/set, from this client or another way).",
               params=SettingsChangedParams),
)

"""Toolsets installed from a URL (toolsets/import {url}): is a newer bundle there, and the upgrade in place."""

from __future__ import annotations

from typing import Annotated

import msgspec

from .base import MethodSpec, Model
from .errors import ErrorCode
from .toolsets import Toolset


class CheckUpdateParams(Model):
    id: Annotated[str, msgspec.Meta(description="A toolset installed with toolsets/import {url}.")]


class UpdateCheck(Model):
    toolset_id: Annotated[str, msgspec.Meta(description="The toolset asked about.")]
    url: Annotated[str, msgspec.Meta(description="Where its bundle comes from (its sourceRef).")]
    update_available: Annotated[bool, msgspec.Meta(description=(
        "The bundle at the URL differs from the one installed (by its sha256): toolsets/upgrade installs it."))]
    current_version: Annotated[str, msgspec.Meta(description="The installed manifest's version.")]
    current_sha256: Annotated[str | None, msgspec.Meta(
        description="The sha256 of the bundle ZIP installed.")] = None
    available_version: Annotated[str | None, msgspec.Meta(description=(
        "The version the bundle at the URL declares; absent when it is the one installed."))] = None
    available_sha256: Annotated[str | None, msgspec.Meta(description=(
        "The sha256 of the bundle at the URL; absent when it is the one installed."))] = None
    not_modified: Annotated[bool, msgspec.Meta(description=(
        "The server answered 304 Not Modified to the installed bundle's ETag / Last-Modified: nothing "
        "was downloaded."))] = False


class UpgradeParams(Model):
    id: Annotated[str, msgspec.Meta(description="A toolset installed with toolsets/import {url}.")]
    sha256: Annotated[str | None, msgspec.Meta(description=(
        "The new ZIP's expected sha256 (64 hex digits): a download that differs is refused "
        "(InvalidParams at params.sha256) and the installed toolset is left as it is."))] = None
    work_done_token: Annotated[int | str | None, msgspec.Meta(
        description="The download's progress is reported as $/progress with this token.")] = None


class UpgradeResult(Model):
    toolset: Annotated[Toolset, msgspec.Meta(description="The toolset after the upgrade.")]
    upgraded: Annotated[bool, msgspec.Meta(description=(
        "False when the bundle at the URL is the one installed (nothing changed)."))]
    previous_version: Annotated[str, msgspec.Meta(description="The version installed before.")]


_ERRORS = (ErrorCode.NOT_FOUND, ErrorCode.CONFLICT, ErrorCode.INVALID_BUNDLE, ErrorCode.INVALID_PARAMS,
           ErrorCode.PERMISSION_DENIED, ErrorCode.UPSTREAM_ERROR, ErrorCode.STORAGE_ERROR)

SPECS = (
    MethodSpec("toolsets/checkUpdate", "clientToServer", "request",
               "Ask a URL-installed toolset's server whether its bundle changed (a conditional GET with the "
               "ETag / Last-Modified it gave, else a download compared by sha256) and which version the new "
               "one is. Installs nothing. Conflict for a toolset not installed from a URL.",
               params=CheckUpdateParams, result=UpdateCheck, errors=_ERRORS),
    MethodSpec("toolsets/upgrade", "clientToServer", "request",
               "Download the bundle at a URL-installed toolset's sourceRef and install it in place of the "
               "installed one, with the same checks as toolsets/import; the overrides the user made, the "
               "config values its schema still has and the secrets stay. A bundle that is now another "
               "toolset (another id) is refused (InvalidBundle) and nothing changes.",
               params=UpgradeParams, result=UpgradeResult, errors=_ERRORS),
)

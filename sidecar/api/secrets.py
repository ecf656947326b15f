"""Secrets: values the user keeps in the OS keystore (or a 0600 file where there is none), that MCP
servers and model providers refer to as ``${NAME}``."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from .base import Empty, MethodSpec, Model
from .errors import ErrorCode

SecretBackend = Literal["keystore", "file"]


class SetSecretParams(Model):
    name: Annotated[str, msgspec.Meta(
        description="What ${NAME} refers to: 1-128 upper-case letters, digits and '_', not starting with a "
                    "digit (^[A-Z_][A-Z0-9_]{0,127}$).")]
    value: Annotated[str, msgspec.Meta(
        description="The secret. Trailing whitespace and newlines are stripped (a pasted key often ends with "
                    "one); it may not be empty (use secrets/delete), hold NUL, or pass 65536 characters. "
                    "Never shown again: responses, logs and errors only ever show it masked.")]


class SecretNameParams(Model):
    name: Annotated[str, msgspec.Meta(description="The secret's name, as secrets/list shows it.")]


class Secret(Model):
    name: Annotated[str, msgspec.Meta(description="The name ${NAME} refers to.")]
    masked: Annotated[str, msgspec.Meta(
        description="'****' and the last 4 characters of a value of 12 or more characters, else '****'; "
                    "'****' too while the keystore cannot be read (see error).")]
    used_by: Annotated[list[str], msgspec.Meta(
        description="What refers to it: 'mcpServer:<server key>' (its env, args, command, cwd, url or "
                    "headers) and 'provider:<id>' (its apiKey, baseUrl or headers).")]


class SecretsResult(Model):
    secrets: Annotated[list[Secret], msgspec.Meta(description="Every secret the user set, by name.")]
    backend: Annotated[SecretBackend, msgspec.Meta(
        description="Where the values are: 'keystore' (macOS Keychain, Windows Credential Locker, the Secret "
                    "Service on Linux) or 'file' (secrets.json in the data directory, mode 0600, used when no "
                    "keystore was usable the first time a secret was stored, or when --secrets-backend file "
                    "forces it). Chosen once per data directory and recorded: a keystore that is locked or "
                    "gone later is an error, never a silent switch to the file.")]
    error: Annotated[str | None, msgspec.Meta(
        description="Why the keystore cannot be used right now (locked, not running), and what to do.")] = None
    path: Annotated[str | None, msgspec.Meta(description="The file backend's file.")] = None


_IP, _NF, _ST = ErrorCode.INVALID_PARAMS, ErrorCode.NOT_FOUND, ErrorCode.STORAGE_ERROR

SPECS = (
    MethodSpec("secrets/set", "clientToServer", "request",
               "Store a secret (replacing one of that name). Takes effect at once, without a restart: an MCP "
               "server in error because ${NAME} was missing connects again, and providers use it from their "
               "next turn. StorageError when the keystore is locked or not running (the old value is kept).",
               params=SetSecretParams, result=Empty, errors=(_IP, _ST)),
    MethodSpec("secrets/list", "clientToServer", "request",
               "The user's secrets, masked, with what refers to each, and which backend holds them.",
               result=SecretsResult, errors=(_ST,)),
    MethodSpec("secrets/delete", "clientToServer", "request",
               "Remove a secret. Servers and providers that refer to it keep what they connected with; at "
               "their next connect ${NAME} comes from the environment, or is reported missing.",
               params=SecretNameParams, result=Empty, errors=(_IP, _NF, _ST)),
)

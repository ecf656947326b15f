"""Model providers: which APIs the chat turns can call, with what key and model."""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from .base import Empty, Id, MethodSpec, Model
from .errors import ErrorCode

ProviderKind = Literal["scripted", "openai", "anthropic"]


class Provider(Model):
    id: str
    kind: ProviderKind
    has_api_key: bool
    # timeout (seconds), maxRetries, headers (values masked), vision, audio; a scripted provider's script
    config: dict[str, Any]
    is_default: bool
    built_in: bool  # the scripted provider: always there, never removed
    base_url: str | None = None
    api_key: str | None = None  # masked ("sk-…abcd"); a ${VAR} reference is shown as is
    default_model: str | None = None
    updated_at: str | None = None  # absent: the built-in provider was never configured


class ProvidersResult(Model):
    providers: list[Provider]
    default_id: str


class SetProviderParams(Model):
    # an existing id is replaced whole (but for apiKey)
    id: Id
    kind: ProviderKind
    base_url: str | None = None  # an OpenAI- or Anthropic-compatible server; may hold ${VAR}
    # Absent: keep the stored key; null: remove it. A literal key goes to the secret store (the OS
    # keystore, or the 0600 file), trailing whitespace stripped; a ${VAR} reference is resolved when
    # the provider connects (the secrets, then the environment).
    api_key: str | None | msgspec.UnsetType = msgspec.UNSET
    default_model: str | None = None
    # timeout (seconds > 0), maxRetries (0-10, default 2), headers (values may hold ${VAR}), vision
    # (whether the model takes images from tool results; default true for anthropic and for openai
    # without a baseUrl, false for other OpenAI-compatible servers), audio (whether the model takes
    # wav/mp3 sound from tool results, given to openai as input_audio; default false); contextWindow
    # (the model's context in tokens: 200000 for anthropic, 128000 for openai and scripted; 10% of it is
    # the default budget of tool definitions, see settings toolBudgetTokens); maxTools (tools per request
    # at most: openai 128, as its API documents, unless said; anthropic none); toolSearch (the API's own
    # search loading deferred tools: anthropic "bm25" or "regex", default "bm25" without a baseUrl; openai
    # "hosted", the default with api "responses"; false: none, a turn over its budget offers find_tools
    # instead); api (openai: "chat", chat completions, the default, or "responses", the Responses API,
    # which has tool_search); for kind scripted: script (a list of replies), contextWindow, maxTools
    config: dict[str, Any] = {}


class ProviderResult(Model):
    provider: Provider


class ProviderIdParams(Model):
    id: str


_NF, _IP, _PD, _ST = ErrorCode.NOT_FOUND, ErrorCode.INVALID_PARAMS, ErrorCode.PERMISSION_DENIED, ErrorCode.STORAGE_ERROR

SPECS = (
    MethodSpec("providers/list", "clientToServer", "request",
               "Every model provider (the built-in scripted one first) and which one is the default.",
               result=ProvidersResult, errors=(_ST,)),
    MethodSpec("providers/set", "clientToServer", "request",
               "Create or replace a model provider; a literal key goes to the secret store, and keys are only "
               "ever shown masked. StorageError when the keystore is locked or not running.",
               params=SetProviderParams, result=ProviderResult, errors=(_IP, _ST)),
    MethodSpec("providers/remove", "clientToServer", "request",
               "Remove a provider (the built-in scripted one cannot be); if it was the default, scripted "
               "becomes the default again.",
               params=ProviderIdParams, result=Empty, errors=(_NF, _PD, _ST)),
    MethodSpec("providers/setDefault", "clientToServer", "request",
               "Make a provider the one that answers turns that name none.",
               params=ProviderIdParams, result=ProviderResult, errors=(_NF, _ST)),
)

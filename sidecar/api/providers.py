"""Model providers: which APIs the chat turns can call, with what key and model."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from .base import Empty, Id, MethodSpec, Model
from .errors import ErrorCode

ProviderKind = Literal["scripted", "openai", "anthropic"]


_KIND = ("'openai' (OpenAI or an OpenAI-compatible server), 'anthropic' (Anthropic or a compatible server) or "
         "'scripted' (no API: canned replies, for demos and tests).")


class Provider(Model):
    id: Annotated[str, msgspec.Meta(description="The provider's id, as chat/send provider names it.")]
    kind: Annotated[ProviderKind, msgspec.Meta(description=_KIND)]
    has_api_key: Annotated[bool, msgspec.Meta(
        description="Whether a key is set (a literal one in the secret store, or a ${VAR} reference).")]
    config: Annotated[dict[str, Any], msgspec.Meta(
        description="Its settings as providers/set took them (see SetProviderParams.config); a header value "
                    "that looks secret shows as '****' (a ${VAR} reference as is: a literal secret given was "
                    "stored and replaced by one). Empty when none.")]
    is_default: Annotated[bool, msgspec.Meta(
        description="Whether it answers turns that name no provider (providers/setDefault).")]
    built_in: Annotated[bool, msgspec.Meta(
        description="True only for the built-in scripted provider (id 'scripted'): always there, never removed.")]
    base_url: Annotated[str | None, msgspec.Meta(
        description="The server it calls, with any secret in the URL (password, token parameter) masked; absent: "
                    "the kind's official API.")] = None
    api_key: Annotated[str | None, msgspec.Meta(
        description="The key masked: its first 3 and last 4 characters ('sk-…abcd'; '****' when shorter than 16 "
                    "characters or when the keystore holding it cannot be read now); a ${VAR} reference as is. "
                    "Absent: no key.")] = None
    default_model: Annotated[str | None, msgspec.Meta(
        description="The model asked when a turn names none; absent: a turn must name one (else its error "
                    "says to set this).")] = None
    updated_at: Annotated[str | None, msgspec.Meta(
        description="When it was last set with providers/set, ISO 8601 UTC ('2026-01-02T03:04:05.678901Z'); "
                    "absent: the built-in provider was never configured.")] = None


class ProvidersResult(Model):
    providers: Annotated[list[Provider], msgspec.Meta(
        description="Every provider: the built-in scripted one first, then the others by id.")]
    default_id: Annotated[str, msgspec.Meta(
        description="The id of the default provider ('scripted' until another is made the default).")]


# An existing id is replaced whole (but for apiKey).
class SetProviderParams(Model):
    id: Annotated[Id, msgspec.Meta(
        description="1-64 letters, digits, '.', '_' and '-', starting with a letter or digit; an existing "
                    "provider of that id is replaced whole (but for apiKey, see there).")]
    kind: Annotated[ProviderKind, msgspec.Meta(
        description=_KIND + " The built-in provider 'scripted' can only be 'scripted'.")]
    base_url: Annotated[str | None, msgspec.Meta(
        description="An http(s) URL of an OpenAI- or Anthropic-compatible server; may hold ${VAR} references, "
                    "and a literal secret in it goes to the secret store. Absent: the kind's official API. Not "
                    "for kind scripted.")] = None
    api_key: Annotated[str | None | msgspec.UnsetType, msgspec.Meta(
        description="Absent: keep the stored key (as does the masked form responses show); null: remove it. A "
                    "literal key goes to the secret store (the OS keystore, or the 0600 file), surrounding "
                    "whitespace stripped; a ${VAR} reference is resolved when the provider connects (the secrets, "
                    "then the environment). Not for kind scripted.")] = msgspec.UNSET
    default_model: Annotated[str | None, msgspec.Meta(
        description="The model asked when a turn names none; absent, null or empty: none.")] = None
    config: Annotated[dict[str, Any], msgspec.Meta(
        description="Optional settings: timeout (seconds > 0), maxRetries (0-10, default 2), headers (values "
                    "may hold ${VAR}; a literal secret value goes to the secret store), vision (whether the model "
                    "takes images from tool results; default true for anthropic and for openai without a "
                    "baseUrl, false for other OpenAI-compatible servers), audio (whether the model takes wav/mp3 "
                    "sound from tool results, given to openai as input_audio; default false), contextWindow (the "
                    "model's context in tokens, 1000 or more: 200000 for anthropic, 128000 for openai and "
                    "scripted by default; 10% of it is the default budget of tool definitions, see settings "
                    "toolBudgetTokens), maxTools (tools per request at most, 1-10000: openai 128 by default, as "
                    "its API documents; anthropic none), toolSearch (the API's own search loading deferred "
                    "tools: anthropic 'bm25' or 'regex', default 'bm25' without a baseUrl; openai 'hosted', the "
                    "default with api 'responses'; false: none, and a turn over its budget offers find_tools "
                    "instead), api (openai only: 'chat', chat completions, the default, or 'responses', the "
                    "Responses API, which has tool search). Kind scripted: script (a list of reply objects), "
                    "contextWindow, maxTools. For openai and anthropic an unknown key is InvalidParams.")] = {}


class ProviderResult(Model):
    provider: Annotated[Provider, msgspec.Meta(description="The provider, as providers/list shows it.")]


class ProviderIdParams(Model):
    id: Annotated[str, msgspec.Meta(description="The provider (NotFound if unknown).")]


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

"""Which model providers exist, how each is reached, and which one answers when a turn names none.

Rows live in ``store/providers.py``, with which one is the default. The built-in ``scripted``
provider needs no row (a row may still give it a script) and cannot be removed, so there is always
a provider to talk to. A literal API key goes to the secret store (entry ``provider:<id>``; the row
keeps that name); a ``${VAR}`` reference stays in the row and is resolved (the user's secrets, then
the environment) only when the provider is built. Nothing here logs a key.
"""

from __future__ import annotations

import enum
import logging
import re
from collections.abc import Mapping
from typing import Any, Final, get_args

from ... import secrets
from ...api.base import is_id
from ...errors import InvalidParams, NotFound, PermissionDenied, StorageError
from ...secrets import MASK, mask_map, mask_url, masked_key, references_in
from ...secrets.store import SecretStore
from ...store import Database
from ...store.providers import BUILTIN_ID, ProviderKind, ProviderRepo, ProviderRow
from ...store.rows import now
from .base import Provider

log = logging.getLogger("sidecar.providers")

__all__ = ["BUILTIN_ID", "KEEP", "ProviderRow", "ProviderService"]

KINDS: Final[tuple[ProviderKind, ...]] = get_args(ProviderKind)
# config keys of the providers that call an API; a scripted provider's config is its own business.
REMOTE_CONFIG: Final = ("timeout", "maxRetries", "headers", "vision", "audio", "contextWindow", "maxTools",
                         "toolSearch", "api")
# The variables the SDKs read a key from when none is configured: a secret of that name works too.
_ENV_KEYS: Final = ("${OPENAI_API_KEY}", "${ANTHROPIC_API_KEY}")


class Keep(enum.Enum):
    KEEP = "keep"


KEEP: Final = Keep.KEEP  # ``set(api_key=KEEP)``: leave the stored key as it is

_BUILTIN = ProviderRow(id=BUILTIN_ID, kind="scripted")


def key_secret(provider_id: str) -> str:
    """The secret store's entry for a provider's literal key (not a name ``${VAR}`` can refer to)."""
    return f"provider:{provider_id}"


class ProviderService:
    def __init__(self, db: Database, secrets: SecretStore) -> None:
        self.repo = ProviderRepo(db)
        self.secrets = secrets
        # id -> (updated_at of the row it was built from, instance): a provider keeps its client
        # (and a scripted one its place in the script) until its row changes.
        self._instances: dict[str, tuple[str | None, Provider]] = {}

    async def all_providers(self) -> list[ProviderRow]:
        """The built-in provider first, then the configured ones by id."""
        rows = await self.repo.all_rows()
        builtin = next((r for r in rows if r.built_in), _BUILTIN)
        return [builtin, *(r for r in rows if not r.built_in)]

    async def find(self, provider_id: str) -> ProviderRow:
        row = await self.repo.get(provider_id)
        if row is not None:
            return row
        if provider_id == BUILTIN_ID:
            return _BUILTIN
        raise NotFound("provider", provider_id)

    async def set(self, provider_id: str, kind: str, *, base_url: str | None = None,
                  api_key: str | None | Keep = KEEP, default_model: str | None = None,
                  config: dict[str, Any] | None = None) -> ProviderRow:
        """Create or replace a provider. Every field is as given, except ``api_key=KEEP`` (keeps the
        stored key, which responses only ever show masked), and a key or header value sent back
        exactly as responses mask it, which keeps the stored value too."""
        _check_id(provider_id)
        checked_kind = _kind(kind)
        if provider_id == BUILTIN_ID and kind != "scripted":
            raise InvalidParams("params.kind", f"the built-in provider {BUILTIN_ID!r} is always scripted")
        old = await self.repo.get(provider_id)
        old_key = await self._key(old) if old is not None else None
        if isinstance(api_key, Keep) or (old_key and api_key == masked_key(old_key)):
            api_key = old_key if kind != "scripted" else None
        if isinstance(api_key, str):
            api_key = api_key.strip()  # a key pasted with its newline would leak through httpx's header error
        if old is not None and old.base_url and base_url and base_url != old.base_url \
                and base_url == mask_url(old.base_url):
            base_url = old.base_url  # sent back as responses showed it
        config = dict(config or {})
        _check(kind, base_url, api_key, default_model, config)
        _keep_masked_headers(config, (old.config or {}) if old is not None else {})
        base_url, config = await self._store_literals(provider_id, base_url, config, old)
        secret = None
        if api_key and "${" not in api_key:  # a literal key: into the store, the row keeps its name
            secret = key_secret(provider_id)
            await self.secrets.set(secret, api_key)
            api_key = None
        row = ProviderRow(id=provider_id, kind=checked_kind, base_url=base_url, api_key=api_key or None,
                          api_key_secret=secret, default_model=default_model or None, config=config,
                          updated_at=now())
        await self.repo.put(row)
        self._instances.pop(provider_id, None)
        if secret is None and old is not None and old.api_key_secret:
            await self._forget_key(old.api_key_secret)
        log.info("provider %s set (kind %s)", provider_id, kind)
        return row

    async def _store_literals(self, provider_id: str, base_url: str | None, config: dict[str, Any],
                              old: ProviderRow | None) -> tuple[str | None, dict[str, Any]]:
        """A secret header value or URL token given literally goes to the secret store under a name
        of its own (``GPT_AUTHORIZATION``) and the row keeps ``${GPT_AUTHORIZATION}``, as the key
        does: the database never holds it, and ``secrets/set`` changes it. A name this provider
        referred to before may be taken again: a new value replaces the old one under it."""
        before = references_in([old.base_url, *((old.config or {}).get("headers") or {}).values()]) if old else []
        names = secrets.Placeholders(set(await self.secrets.names()) - set(before), prefix=provider_id)
        headers = config.get("headers")
        if isinstance(headers, dict):
            config = {**config, "headers": secrets.placeholder_map(headers, names)}
        if base_url:
            base_url = secrets.placeholder_url(base_url, names)
        for name, value in names.allocated().items():
            await self.secrets.set(name, value)
        return base_url, config

    async def remove(self, provider_id: str) -> None:
        if provider_id == BUILTIN_ID:
            raise PermissionDenied(f"the built-in provider {BUILTIN_ID!r} cannot be removed")
        old = await self.repo.get(provider_id)
        if old is None or not await self.repo.delete(provider_id):
            raise NotFound("provider", provider_id)
        self._instances.pop(provider_id, None)
        if old.api_key_secret:
            await self._forget_key(old.api_key_secret)
        log.info("provider %s removed", provider_id)

    async def set_default(self, provider_id: str) -> ProviderRow:
        row = await self.find(provider_id)
        await self.repo.set_default(provider_id, now())
        return row

    async def default_id(self) -> str:
        return await self.repo.default_id() or BUILTIN_ID

    async def get(self, provider_id: str | None = None) -> Provider:
        """The provider to stream from (None: the default). Failing to connect is the provider's
        ``ProviderError`` on its first stream, not an error here: only an unknown id is."""
        row = await self.find(provider_id or await self.default_id())
        cached = self._instances.get(row.id)
        if cached is not None and cached[0] == row.updated_at:
            return cached[1]
        headers = (row.config or {}).get("headers") or {}
        variables = await self.secrets.environ(references_in([row.base_url, row.api_key, *headers.values(),
                                                              *_ENV_KEYS]))
        provider = _build(row, await self._key(row), variables)
        self._instances[row.id] = (row.updated_at, provider)
        return provider

    async def shown_key(self, row: ProviderRow) -> str | None:
        """The key as responses show it (``sk-…abcd``, a ${VAR} reference as is); ``****`` when the
        keystore holding it cannot be read right now."""
        try:
            key = await self._key(row)
        except StorageError:
            return MASK
        return masked_key(key) if key else None

    def variable_changed(self, name: str) -> None:
        """A secret was set or deleted: providers are built again, with it, at their next use (a
        turn already streaming keeps the client it has)."""
        self._instances.clear()

    async def references(self) -> dict[str, list[str]]:
        """Variable name -> the providers (``provider:<id>``) whose key, base URL or headers refer to it."""
        found: dict[str, list[str]] = {}
        for row in await self.repo.all_rows():
            headers = (row.config or {}).get("headers") or {}
            for name in references_in([row.base_url, row.api_key, *headers.values()]):
                found.setdefault(name, []).append(f"provider:{row.id}")
        return found

    async def move_keys_to_store(self) -> int:
        """Move the literal keys stored in the database by earlier versions into the secret store; the
        row keeps the entry's name. Idempotent: a move cut short is done again at the next start."""
        moved = 0
        for provider_id, literal in await self.repo.literal_keys():
            name = key_secret(provider_id)
            await self.secrets.set(name, literal)
            await self.repo.key_moved(provider_id, literal, name)
            moved += 1
        if moved:
            log.info("moved %d provider API keys from the database to the secret store (%s)", moved,
                     self.secrets.backend)
        return moved

    async def _key(self, row: ProviderRow) -> str | None:
        """The key as given: a literal (read from the secret store) or a ${VAR} reference."""
        if row.api_key_secret:
            return await self.secrets.get(row.api_key_secret)
        return row.api_key

    async def _forget_key(self, name: str) -> None:
        try:
            await self.secrets.delete(name)
        except StorageError as exc:  # the row no longer names it: an unused entry, not a failure
            log.warning("the old key of a provider stays in the secret store: %s", exc.message)

    async def aclose(self) -> None:
        """Close the HTTP clients of the providers built so far."""
        for _, provider in self._instances.values():
            close = getattr(provider, "aclose", None)
            if close is not None:
                await close()
        self._instances.clear()


def _build(row: ProviderRow, key: str | None, variables: Mapping[str, str]) -> Provider:
    # Each kind's module (and its SDK) is imported only once a provider of that kind is used.
    config = row.config or {}
    if row.kind == "scripted":
        from .scripted import ScriptedProvider

        return ScriptedProvider(row.id, config)
    from .remote import Endpoint

    endpoint = Endpoint.of(row.id, row.base_url, key, row.default_model, config, variables)
    if row.kind == "openai":
        from .openai_compat import OpenAIProvider

        return OpenAIProvider(endpoint)
    from .anthropic import AnthropicProvider

    return AnthropicProvider(endpoint)


def _kind(kind: str) -> ProviderKind:
    for known in KINDS:
        if kind == known:
            return known
    raise InvalidParams("params.kind", f"must be one of {', '.join(KINDS)}")


def _check_id(provider_id: str) -> None:
    if not is_id(provider_id):
        raise InvalidParams("params.id", "use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit")


def _check(kind: str, base_url: str | None, api_key: str | None, default_model: str | None,
           config: dict[str, Any]) -> None:
    if kind == "scripted":
        if base_url or api_key:
            raise InvalidParams("params.baseUrl" if base_url else "params.apiKey",
                                "a scripted provider calls no API: leave it out")
        script = config.get("script")
        if script is not None and not (isinstance(script, list) and all(isinstance(s, dict) for s in script)):
            raise InvalidParams("params.config.script", "must be a list of reply objects")
        return
    if base_url is not None and "${" not in base_url and not re.match(r"^https?://[^/\s]+", base_url):
        raise InvalidParams("params.baseUrl", "must be an http:// or https:// URL (or hold a ${VAR} reference)")
    for key, value in config.items():
        path = f"params.config.{key}"
        if key not in REMOTE_CONFIG:
            raise InvalidParams(path, f"unknown setting; a {kind} provider takes {', '.join(REMOTE_CONFIG)}")
        if key == "timeout" and not (_is_number(value) and value > 0):
            raise InvalidParams(path, "must be a number of seconds above 0")
        if key == "maxRetries" and not (isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 10):
            raise InvalidParams(path, "must be a whole number from 0 to 10")
        if key == "vision" and not isinstance(value, bool):
            raise InvalidParams(path, "must be true (the model takes images) or false")
        if key == "audio" and not isinstance(value, bool):
            raise InvalidParams(path, "must be true (the model takes wav and mp3 audio) or false")
        _check_tool_limits(kind, key, value, path)
        if key == "headers" and not (isinstance(value, dict) and all(isinstance(v, str) for v in value.values())):
            raise InvalidParams(path, "must map header names to string values")


def _check_tool_limits(kind: str, key: str, value: Any, path: str) -> None:
    """config contextWindow, maxTools and toolSearch: what bounds the tools a turn sends (issue 28)."""
    whole = isinstance(value, int) and not isinstance(value, bool)
    if key == "contextWindow" and not (whole and 1000 <= value <= 100_000_000):
        raise InvalidParams(path, "must be the model's context window in tokens (1000 or more)")
    if key == "maxTools" and not (whole and 1 <= value <= 10_000):
        raise InvalidParams(path, "must be a whole number from 1 to 10000 (tools per request)")
    if key == "toolSearch" and kind == "anthropic" and value not in ("bm25", "regex", False):
        raise InvalidParams(path, '"bm25", "regex" or false (no tool search)')
    if key == "toolSearch" and kind == "openai" and value not in ("hosted", False):
        raise InvalidParams(path, '"hosted" (with api "responses") or false (no tool search)')
    if key == "api" and (kind != "openai" or value not in ("chat", "responses")):
        raise InvalidParams(path, 'OpenAI providers only: "chat" (chat completions) or "responses"')


def _keep_masked_headers(config: dict[str, Any], old_config: dict[str, Any]) -> None:
    """A header sent back as the mask responses showed keeps its stored value."""

    headers, old = config.get("headers"), old_config.get("headers") or {}
    if isinstance(headers, dict):
        shown = mask_map({k: v for k, v in old.items() if isinstance(v, str)})
        # A bare mask ("****", "Bearer ****") is never a value: a UI that kept what it showed earlier.
        config["headers"] = {k: old[k] if k in shown and (v == shown[k] or MASK in v) else v
                             for k, v in headers.items()}


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)

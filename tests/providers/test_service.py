"""ProviderService over a real database: the built-in provider, upserts and their key handling,
the default, validation, and the provider instances it builds and keeps."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from sidecar.chat.providers.anthropic import AnthropicProvider
from sidecar.chat.providers.base import ChatMessage, TurnRequest
from sidecar.chat.providers.openai_compat import OpenAIProvider
from sidecar.chat.providers.service import KEEP, ProviderService
from sidecar.errors import InvalidParams, NotFound, PermissionDenied
from sidecar.secrets import mask_map, mask_url, masked_key
from sidecar.secrets.store import SecretStore
from sidecar.store import Database
from tests.providers.support import KEY, run, text_of

pytestmark = pytest.mark.anyio


@pytest.fixture
async def service(tmp_path: Path) -> AsyncIterator[ProviderService]:
    db = await Database.open(tmp_path / "sidecar.db")
    svc = ProviderService(db, SecretStore(tmp_path, "file"))
    yield svc
    await svc.aclose()
    await db.close()


async def test_the_scripted_provider_is_always_there_and_the_default(service: ProviderService):
    [builtin] = await service.all_providers()
    assert (builtin.id, builtin.kind, builtin.built_in, builtin.updated_at) == ("scripted", "scripted", True, None)
    assert await service.default_id() == "scripted"
    provider = await service.get(None)
    assert (provider.id, provider.kind) == ("scripted", "scripted")
    assert await service.get("scripted") is provider
    with pytest.raises(PermissionDenied):
        await service.remove("scripted")


async def test_a_script_for_the_builtin_provider(service: ProviderService):
    before = await service.get(None)
    row = await service.set("scripted", "scripted", config={"script": [{"text": "scripted hello"}]})
    assert row.built_in and row.config == {"script": [{"text": "scripted hello"}]}
    provider = await service.get(None)
    assert provider is not before  # rebuilt from the changed row
    got, error = await run(provider, TurnRequest(None, [ChatMessage("user", "hi")], []))
    assert error is None and text_of(got) == "scripted hello"
    assert [r.id for r in await service.all_providers()] == ["scripted"]


async def test_configured_providers_are_built_once_per_version_of_their_row(service: ProviderService):
    await service.set("gpt", "openai", base_url="http://127.0.0.1:9/v1", api_key=KEY, default_model="gpt-test",
                      config={"timeout": 5, "maxRetries": 0, "headers": {"X-Org": "acme"}})
    await service.set("claude", "anthropic", api_key="${ANTHROPIC_TEST_KEY}")
    assert [r.id for r in await service.all_providers()] == ["scripted", "claude", "gpt"]

    gpt = await service.get("gpt")
    assert isinstance(gpt, OpenAIProvider) and gpt.id == "gpt"
    assert (gpt.endpoint.timeout, gpt.endpoint.max_retries, gpt.endpoint.headers) == (5.0, 0, {"X-Org": "acme"})
    assert await service.get("gpt") is gpt
    assert isinstance(await service.get("claude"), AnthropicProvider)

    await service.set("gpt", "openai", default_model="gpt-other")
    again = await service.get("gpt")
    assert again is not gpt and again.endpoint.default_model == "gpt-other"  # type: ignore[attr-defined]
    with pytest.raises(NotFound):
        await service.get("nope")


async def test_the_stored_key_is_kept_unless_replaced_or_removed(service: ProviderService):
    store = service.secrets
    await service.set("gpt", "openai", api_key=KEY, config={"headers": {"X-Secret": "header-secret-value"}})
    row = await service.set("gpt", "openai", api_key=KEEP, config={"headers": {"X-Secret": "****"}})
    # The row names the store's entry; the key itself is in the store only.
    assert (row.api_key, row.api_key_secret) == (None, "provider:gpt") and await store.get("provider:gpt") == KEY
    # A secret header is kept like the key: in the store, the row refers to it.
    assert row.config == {"headers": {"X-Secret": "${GPT_X_SECRET}"}}
    assert await store.get("GPT_X_SECRET") == "header-secret-value"
    assert await service.shown_key(row) == masked_key(KEY)
    row = await service.set("gpt", "openai", api_key=masked_key(KEY))  # the UI sent back what it was shown
    assert row.api_key_secret == "provider:gpt" and await store.get("provider:gpt") == KEY
    row = await service.set("gpt", "openai", api_key="sk-new-0000000000000000000\n")  # pasted with its newline
    assert await store.get("provider:gpt") == "sk-new-0000000000000000000"
    row = await service.set("gpt", "openai", api_key="${GPT_KEY}")  # a reference stays in the row
    assert (row.api_key, row.api_key_secret) == ("${GPT_KEY}", None) and await store.get("provider:gpt") is None
    assert await service.shown_key(row) == "${GPT_KEY}"
    await service.set("gpt", "openai", api_key=KEY)
    row = await service.set("gpt", "openai", api_key=None)
    assert (row.api_key, row.api_key_secret) == (None, None) and await store.names() == ["GPT_X_SECRET"]
    assert (await service.find("gpt")).api_key is None


async def test_a_key_reference_is_read_from_the_secret_store_first(service: ProviderService,
                                                                    monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("GPT_KEY", "sk-from-the-environment-0000")
    await service.set("gpt", "openai", api_key="${GPT_KEY}", base_url="${GPT_BASE}/v1")
    await service.secrets.set("GPT_BASE", "http://127.0.0.1:9")
    await service.secrets.set("GPT_KEY", "sk-from-the-store-00000000")
    gpt = await service.get("gpt")
    options = gpt.endpoint.client_options("OPENAI_API_KEY")  # type: ignore[attr-defined]
    assert (options["api_key"], options["base_url"]) == ("sk-from-the-store-00000000", "http://127.0.0.1:9/v1")
    service.variable_changed("GPT_KEY")  # what a secrets/set announces: the next turn builds anew
    await service.secrets.delete("GPT_KEY")
    again = await service.get("gpt")
    assert again is not gpt
    assert again.endpoint.client_options("OPENAI_API_KEY")["api_key"] == "sk-from-the-environment-0000"  # type: ignore[attr-defined]


async def test_the_default_follows_set_default_and_remove(service: ProviderService):
    await service.set("claude", "anthropic", api_key=KEY)
    assert (await service.set_default("claude")).id == "claude"
    assert await service.default_id() == "claude"
    assert isinstance(await service.get(None), AnthropicProvider)
    await service.remove("claude")
    assert await service.default_id() == "scripted"
    with pytest.raises(NotFound):
        await service.remove("claude")
    with pytest.raises(NotFound):
        await service.set_default("claude")


@pytest.mark.parametrize(("args", "kwargs", "path"), [
    (("bad id!", "openai"), {}, "params.id"),
    (("-dash", "openai"), {}, "params.id"),
    (("x" * 65, "openai"), {}, "params.id"),
    (("ok", "gemini"), {}, "params.kind"),
    (("scripted", "openai"), {}, "params.kind"),
    (("ok", "openai"), {"base_url": "ftp://example"}, "params.baseUrl"),
    (("ok", "openai"), {"config": {"maxRetries": -1}}, "params.config.maxRetries"),
    (("ok", "openai"), {"config": {"timeout": 0}}, "params.config.timeout"),
    (("ok", "openai"), {"config": {"headers": {"X": 1}}}, "params.config.headers"),
    (("ok", "openai"), {"config": {"retries": 1}}, "params.config.retries"),
    (("ok", "scripted"), {"api_key": "sk-x"}, "params.apiKey"),
    (("ok", "scripted"), {"config": {"script": "hello"}}, "params.config.script"),
])
async def test_invalid_settings_are_refused(service: ProviderService, args, kwargs, path):
    with pytest.raises(InvalidParams) as caught:
        await service.set(*args, **kwargs)
    assert caught.value.data["path"] == path
    assert [r.id for r in await service.all_providers()] == ["scripted"]


def test_keys_are_shown_masked_but_references_as_they_are():
    assert masked_key(KEY) == "sk-…9a7d"
    assert masked_key("short-key") == "****"
    assert masked_key("${OPENAI_API_KEY}") == "${OPENAI_API_KEY}"


async def test_a_pasted_key_loses_its_newline_and_url_tokens_and_secret_headers_go_to_the_store(
        service: ProviderService):
    base = "https://proxy.example/v1/Zr5Tb8Yc2Hm6Jq9Lw4Ks?token=t0k3n"
    row = await service.set("gpt", "openai", base_url=base, api_key=f"  {KEY}\n",
                            config={"headers": {"Authorization": "Bearer hdr-secret-1\n", "X-Team": "core"}})
    assert await service.secrets.get("provider:gpt") == KEY
    # The row refers to the store; what responses show is what the UI sends back, and it keeps them.
    assert row.base_url == "https://proxy.example/v1/${GPT_URL_TOKEN}?token=${GPT_TOKEN}"
    assert row.config["headers"] == {"Authorization": "Bearer ${GPT_AUTHORIZATION}", "X-Team": "core"}
    assert [await service.secrets.get(n) for n in ("GPT_URL_TOKEN", "GPT_TOKEN", "GPT_AUTHORIZATION")] == [
        "Zr5Tb8Yc2Hm6Jq9Lw4Ks", "t0k3n", "hdr-secret-1"]
    assert mask_url(row.base_url) == row.base_url and mask_map(row.config["headers"]) == row.config["headers"]
    row = await service.set("gpt", "openai", base_url=row.base_url, api_key=KEEP,
                            config={"headers": row.config["headers"] | {"X-Team": "platform"}})
    assert row.base_url == "https://proxy.example/v1/${GPT_URL_TOKEN}?token=${GPT_TOKEN}"
    assert row.config["headers"] == {"Authorization": "Bearer ${GPT_AUTHORIZATION}", "X-Team": "platform"}
    # A new literal value takes the name this provider used for it.
    row = await service.set("gpt", "openai", base_url=row.base_url, api_key=KEEP,
                            config={"headers": {"Authorization": "Bearer hdr-secret-2"}})
    assert row.config["headers"] == {"Authorization": "Bearer ${GPT_AUTHORIZATION}"}
    assert await service.secrets.get("GPT_AUTHORIZATION") == "hdr-secret-2"

"""providers/*: stored provider settings, shown with their secrets masked."""

from __future__ import annotations

import msgspec

from .. import secrets
from ..api.base import Empty
from ..api.providers import Provider, ProviderIdParams, ProviderResult, ProvidersResult, SetProviderParams
from ..chat.providers.service import KEEP, ProviderRow, ProviderService
from ..rpc import RequestContext
from .routes import method


def provider_out(row: ProviderRow, default_id: str, shown_key: str | None) -> Provider:
    config = dict(row.config or {})
    if isinstance(config.get("headers"), dict):
        config["headers"] = secrets.mask_map(config["headers"])
    return Provider(
        id=row.id, kind=row.kind, has_api_key=bool(row.api_key or row.api_key_secret), config=config,
        is_default=row.id == default_id, built_in=row.built_in,
        base_url=secrets.mask_url(row.base_url) if row.base_url else None,
        api_key=shown_key, default_model=row.default_model, updated_at=row.updated_at,
    )


class ProviderHandlers:
    def __init__(self, providers: ProviderService) -> None:
        self.providers = providers

    @method("providers/list")
    async def list_providers(self, p: None, ctx: RequestContext) -> ProvidersResult:
        default_id = await self.providers.default_id()
        return ProvidersResult([provider_out(r, default_id, await self.providers.shown_key(r))
                                for r in await self.providers.all_providers()], default_id)

    @method("providers/set")
    async def set_provider(self, p: SetProviderParams, ctx: RequestContext) -> ProviderResult:
        row = await self.providers.set(p.id, p.kind, base_url=p.base_url, default_model=p.default_model,
                                       api_key=KEEP if p.api_key is msgspec.UNSET else p.api_key, config=p.config)
        return ProviderResult(provider_out(row, await self.providers.default_id(), await self.providers.shown_key(row)))

    @method("providers/remove")
    async def remove(self, p: ProviderIdParams, ctx: RequestContext) -> Empty:
        await self.providers.remove(p.id)
        return Empty()

    @method("providers/setDefault")
    async def set_default(self, p: ProviderIdParams, ctx: RequestContext) -> ProviderResult:
        row = await self.providers.set_default(p.id)
        return ProviderResult(provider_out(row, row.id, await self.providers.shown_key(row)))

"""providers/*: stored provider settings, shown with their secrets masked."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

from ..api.base import Empty
from ..api.providers import Provider, ProviderIdParams, ProviderResult, ProvidersResult, SetProviderParams
from ..chat.providers.service import KEEP, ProviderRow, masked_key
from ..rpc import RequestContext

if TYPE_CHECKING:
    from ..app import Sidecar


def provider_out(row: ProviderRow, default_id: str) -> Provider:
    from ..toolsets import secrets

    config = dict(row.config or {})
    if isinstance(config.get("headers"), dict):
        config["headers"] = secrets.mask_map(config["headers"])
    return Provider(
        id=row.id, kind=row.kind, has_api_key=bool(row.api_key), config=config,  # type: ignore[arg-type]
        is_default=row.id == default_id, built_in=row.built_in,
        base_url=secrets.mask_url(row.base_url) if row.base_url else None,
        api_key=masked_key(row.api_key) if row.api_key else None,
        default_model=row.default_model, updated_at=row.updated_at,
    )


def handlers(app: Sidecar) -> dict[str, Any]:
    async def list_(p: None, ctx: RequestContext) -> ProvidersResult:
        default_id = await app.providers.default_id()
        return ProvidersResult([provider_out(r, default_id) for r in await app.providers.list()], default_id)

    async def set_(p: SetProviderParams, ctx: RequestContext) -> ProviderResult:
        row = await app.providers.set(p.id, p.kind, base_url=p.base_url, default_model=p.default_model,
                                      api_key=KEEP if p.api_key is msgspec.UNSET else p.api_key, config=p.config)
        return ProviderResult(provider_out(row, await app.providers.default_id()))

    async def remove(p: ProviderIdParams, ctx: RequestContext) -> Empty:
        await app.providers.remove(p.id)
        return Empty()

    async def set_default(p: ProviderIdParams, ctx: RequestContext) -> ProviderResult:
        row = await app.providers.set_default(p.id)
        return ProviderResult(provider_out(row, row.id))

    return {"providers/list": list_, "providers/set": set_, "providers/remove": remove,
            "providers/setDefault": set_default}

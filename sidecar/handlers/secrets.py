"""secrets/*: the user's secrets, set and deleted by name, listed masked with what refers to them."""

from __future__ import annotations

from ..api.base import Empty
from ..api.secrets import Secret, SecretNameParams, SecretsResult, SetSecretParams
from ..chat.providers.service import ProviderService
from ..errors import NotFound, StorageError
from ..mcp_host.servers import McpServers
from ..rpc import RequestContext
from ..secrets import MASK
from ..secrets.masking import masked_tail
from ..secrets.store import SecretStore, check_user_name, check_value, is_user_name
from .routes import method


class SecretHandlers:
    def __init__(self, store: SecretStore, servers: McpServers, providers: ProviderService) -> None:
        self.store = store
        self.servers = servers
        self.providers = providers

    @method("secrets/set")
    async def set(self, p: SetSecretParams, ctx: RequestContext) -> Empty:
        await self.store.set(check_user_name(p.name), check_value(p.value))
        return Empty()

    @method("secrets/delete")
    async def delete(self, p: SecretNameParams, ctx: RequestContext) -> Empty:
        if not await self.store.delete(check_user_name(p.name)):
            raise NotFound("secret", p.name)
        return Empty()

    @method("secrets/list")
    async def list(self, p: None, ctx: RequestContext) -> SecretsResult:
        backend = await self.store.choose()
        used_by = await self.servers.references()
        for name, users in (await self.providers.references()).items():
            used_by.setdefault(name, []).extend(users)
        shown: list[Secret] = []
        for name in await self.store.names():
            if not is_user_name(name):
                continue  # the sidecar's own entries (a provider's key, a tool's setting)
            try:
                value = await self.store.get(name)
            except StorageError:
                value = None  # the keystore is locked: the list still says what is there (error says why)
            shown.append(Secret(name=name, masked=masked_tail(value) if value else MASK,
                                used_by=sorted(used_by.get(name, []))))
        return SecretsResult(secrets=shown, backend=backend, error=self.store.error,
                             path=str(self.store.path) if backend == "file" else None)

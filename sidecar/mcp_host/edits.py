"""Editing a stored MCP server (mcpServers/update): the literal secrets of a changed config moved to
the secret store as mcpServers/add moves them, and what the UI sends back masked (as mcpServers/list
shows it) restored to the value it stands for."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import msgspec

from .. import secrets
from ..api.base import wire_name
from ..api.mcp import ServerDecl, ServerType
from ..errors import InvalidParams

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from ..secrets.store import SecretStore

# What mcpServers/update may change: every field of the declaration but its id.
EDITABLE = tuple(f for f in ServerDecl.__struct_fields__ if f != "id")
# A change of type drops the fields of the other kind of server (unless the update gives them).
OF_STDIO = ("command", "args", "cwd", "sandbox", "env_passthrough")
OF_REMOTE = ("url", "headers")


class _Config(Protocol):
    """Where a server's values may hold secrets: a declaration, or a server found in another app."""

    @property
    def args(self) -> Sequence[str]: ...
    @property
    def url(self) -> str | None: ...
    @property
    def env(self) -> Mapping[str, str]: ...
    @property
    def headers(self) -> Mapping[str, str]: ...


def retyped(server: ServerDecl, type_: ServerType) -> ServerDecl:
    """``server`` made a ``type_`` server: the fields only the other kind has go back to their defaults."""
    blank = ServerDecl(id=server.id)
    return msgspec.structs.replace(server, type=type_, **{f: getattr(blank, f)
                                                          for f in (OF_REMOTE if type_ == "stdio" else OF_STDIO)})


def placeholders(server: ServerDecl, names: secrets.Placeholders) -> ServerDecl:
    """The literal secrets in a server's args, env, headers and url as ``${NAME}`` references
    (`names` records the values for the secret store); harmless values stay as given."""
    return msgspec.structs.replace(
        server, args=secrets.placeholder_args(list(server.args), names),
        env=secrets.placeholder_map(dict(server.env), names),
        headers=secrets.placeholder_map(dict(server.headers), names),
        url=secrets.placeholder_url(server.url, names) if server.url else server.url)


def references(server: _Config) -> set[str]:
    return secrets.references_in([*server.args, server.url, *server.env.values(), *server.headers.values()])


def unmasked(field: str, value: Any, old: Any) -> Any:
    """An update's value with what the UI sent back masked (as mcpServers/list shows it) restored to
    the value it stands for; a mask that stands for nothing here is refused, never stored."""
    where = f"params.{wire_name(field)}"

    def refuse(path: str) -> InvalidParams:
        return InvalidParams(path, f"{secrets.MASK} stands for a value that is hidden from you; give the value "
                                   "itself, or send back exactly what mcpServers/list shows to keep it")

    if field in ("env", "headers"):
        shown = secrets.mask_map(dict(old or {}))
        out = {}
        for k, v in value.items():
            if secrets.MASK in v:
                if shown.get(k) != v:
                    raise refuse(f"{where}.{k}")
                v = old[k]
            out[k] = v
        return out
    if field == "args":
        shown_args = secrets.mask_args(list(old or []))
        out_args: list[str] = []
        for i, v in enumerate(value):
            if secrets.MASK in v:
                if i >= len(shown_args) or shown_args[i] != v:
                    raise refuse(f"{where}[{i}]")
                v = old[i]
            out_args.append(v)
        return out_args
    if field == "url" and value is not None and secrets.MASK in value:
        if not old or secrets.mask_url(old) != value:
            raise refuse(where)
        return old
    return value


async def restore(vault: SecretStore, stored: dict[str, str], replaced: dict[str, str | None]) -> None:
    """Undo an update's secrets: new names deleted, reused ones given their old value back."""
    for name in stored:
        old = replaced.get(name)
        if old is None:
            await vault.delete(name)
        else:
            await vault.set(name, old)

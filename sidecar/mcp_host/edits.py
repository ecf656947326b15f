"""Editing a stored MCP server (mcpServers/update): the row as a manifest entry to change, the
literal secrets of a changed config moved to the secret store as mcpServers/add moves them, and what
the UI sends back masked (as mcpServers/list shows it) restored to the value it stands for."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

from .. import secrets
from ..api.base import wire_name
from ..api.mcp import ServerSandbox
from ..errors import InvalidParams
from ..store.mcp_servers import McpServerRow
from .config import sandbox_block

if TYPE_CHECKING:
    from ..secrets.store import SecretStore

EDITABLE = ("type", "command", "args", "env", "cwd", "url", "headers", "requires_confirmation",
             "connect_timeout", "call_timeout", "log_level", "sandbox")


def declaration_of(row: McpServerRow) -> dict[str, Any]:
    """A stored server as a manifest's mcp_servers entry (what mcpServers/update edits). The older
    ``sandboxed: true`` option becomes the block it means, so an edit writes only ``sandbox``."""
    options = {k: v for k, v in row.options.items() if k not in ("sandbox", "sandboxed")}
    if (block := sandbox_block(row.options)) is not None:
        options["sandbox"] = block
    return {"id": row.server_id, "type": row.type, "command": row.command, "args": list(row.args),
            "env": dict(row.env), "cwd": row.cwd, "url": row.url, "headers": dict(row.headers),
            "requires_confirmation": row.requires_confirmation, **options}


def stored_sandbox(given: ServerSandbox | None) -> dict[str, Any] | None:
    """The wire's sandbox as toolset.yaml writes it (only the keys given; {} stays {}: the defaults)."""
    return None if given is None else msgspec.to_builtins(given)


def placeholders(server: dict[str, Any], names: secrets.Placeholders) -> dict[str, Any]:
    """The literal secrets in a server's args, env, headers and url as ``${NAME}`` references
    (`names` records the values for the secret store); harmless values stay as given."""
    out: dict[str, Any] = {"args": secrets.placeholder_args(list(server.get("args") or []), names),
                           "env": secrets.placeholder_map(dict(server.get("env") or {}), names),
                           "headers": secrets.placeholder_map(dict(server.get("headers") or {}), names)}
    if server.get("url"):
        out["url"] = secrets.placeholder_url(server["url"], names)
    return out


def references(server: dict[str, Any]) -> set[str]:
    return secrets.references_in([*(server.get("args") or []), server.get("url"),
                                  *(server.get("env") or {}).values(), *(server.get("headers") or {}).values()])


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
    if field == "sandbox":
        return stored_sandbox(value)
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

"""MCP tools as the catalog shows them: discovered from live connections (never stored, seed 001)
with the toolset's overrides (keyed ``server:tool``, seed 000 §1.4) applied on read."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import msgspec

from ... import frozen
from ...api.tools import Tool
from ...errors import NotFound
from ...mcp_host.servers import find
from ...mcp_host.state import McpTool
from ...store import CATALOG, Database
from ...store.mcp_servers import McpServerRepo, McpServerRow
from ...store.mcp_tools_seen import McpToolsSeenRepo, SeenTool
from ...store.tool_catalog import ToolCatalogRepo
from ...store.toolsets import OverrideRow
from .. import output as tool_output
from .. import slugs
from ..overrides import Layered, apply, is_pattern, layer, switched_on
from ..resolved import McpConfig, Resolved
from ..settings import status_of

if TYPE_CHECKING:
    from ...mcp_host.host import McpHost


def tool_id(row: McpServerRow, name: str) -> str:
    return f"mcp:{row.key}:{name}"


def parse_id(tool_id: str) -> tuple[str, str]:
    """``mcp:toolset~server:tool`` (or legacy ``mcp:server:tool``) -> (server ref, tool name)."""
    ref, sep, name = tool_id.removeprefix("mcp:").partition(":")
    if not tool_id.startswith("mcp:") or not sep or not ref or not name:
        raise NotFound("tool", tool_id, f"{tool_id!r} is not an MCP tool id (mcp:toolset~server:tool)")
    return ref, name


_HINTS = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")


def asks_by_default(server_asks: bool, annotations: dict[str, Any] | None) -> bool:
    """Whether an MCP tool asks the user before it runs, before any override: always when its
    server (or toolset declaration) says so; else by the tool's hints, read with the MCP spec's
    defaults (not read-only, destructive, open-world) once the server gives any hint: a read-only
    tool runs without asking, one that may destroy or reach outside (destructive or open-world)
    asks. A tool with no hints at all keeps the server's setting."""
    if server_asks:
        return True
    hints = annotations or {}
    if not any(h in hints for h in _HINTS):
        return False
    if hints.get("readOnlyHint") is True:
        return False
    return hints.get("destructiveHint") is not False or hints.get("openWorldHint") is not False


def _view(row: McpServerRow, t: McpTool, o: Layered | None) -> Tool:
    tool = apply(Tool(
        id=tool_id(row, t.name), name=t.title or t.name, description=t.description, provider="mcp",
        input_schema=t.input_schema, toolset_id=row.toolset_id,
        requires_confirmation=asks_by_default(row.requires_confirmation, t.annotations),
        enabled=row.should_run, title=t.title, annotations=t.annotations, output_schema=t.output_schema,
        icons=list(t.icons) or None, slug=slugs.derive(t.name), version=slugs.DEFAULT_VERSION, current=True,
    ), *(o if o is not None else (None, None)))
    # Only live connections list tools: one shown here is connected unless switched off.
    return msgspec.structs.replace(tool, status=status_of("mcp", tool.enabled, []))


async def discovered(db: Database, host: McpHost) -> list[Tool]:
    """The tools the live connections offer now, with their toolsets' overrides applied, and
    those a connected server stopped listing that are kept (`_gone_view`)."""
    # On every turn's path: the servers and overrides are read once per change of the catalog.
    servers = await db.cached(CATALOG, ("mcp", "servers"), lambda: _servers_and_overrides(db))
    found: list[Tool] = []
    for row, exact, patterns, vanished in servers:
        listed = host.tools(row.key)
        found += [_view(row, t, _layer(row, exact, patterns, t.name)) for t in listed]
        if vanished and _connected(host, row.key):  # only a connected server can say it no longer has a tool
            names = {t.name for t in listed}
            found += [_gone_view(row, v, _layer(row, exact, patterns, v.name))
                      for v in vanished if v.name not in names]
    return found


def _layer(row: McpServerRow, exact: dict[str, OverrideRow], patterns: list[OverrideRow], name: str) -> Layered:
    """The tool's exact override layered over its toolset's patterns that match it."""
    key = f"{row.server_id}:{name}"
    return layer(exact.get(key), patterns, key)


# Each server with its toolset's overrides (by exact key, and those under a pattern) and the tools
# it no longer lists.
Servers = list[tuple[McpServerRow, dict[str, OverrideRow], list[OverrideRow], list[SeenTool]]]


async def in_order(db: Database, host: McpHost, after: str | None,
                   toolset_ids: frozenset[str] | None = None) -> Iterator[Tool]:
    """The live tools with ids past ``after``, by id, each view made only when it is taken (a page
    of tools/list takes a few of thousands). ``toolset_ids``: only their servers' tools."""
    servers = await db.cached(CATALOG, ("mcp", "servers"), lambda: _servers_and_overrides(db))
    return _in_order(servers, host, after, toolset_ids)


def _in_order(servers: Servers, host: McpHost, after: str | None,
              toolset_ids: frozenset[str] | None) -> Iterator[Tool]:
    # The ids of one server share its prefix "mcp:<key>:", and a key holds no ':', so no prefix
    # starts another: ordering the servers by prefix and each one's tools by name orders the ids.
    for row, exact, patterns, vanished in sorted(servers, key=lambda s: f"mcp:{s[0].key}:"):
        if toolset_ids is not None and row.toolset_id not in toolset_ids:
            continue
        prefix = f"mcp:{row.key}:"
        past = after[len(prefix):] if after is not None and after.startswith(prefix) else None
        if after is not None and past is None and prefix < after:
            continue  # every id of this server sorts before the position
        listed = host.tools(row.key)
        names = {t.name for t in listed}
        gone = [v for v in vanished if v.name not in names] if vanished and _connected(host, row.key) else []
        tools: list[McpTool | SeenTool] = [*listed, *gone]
        for t in sorted(tools, key=lambda t: t.name):
            if past is None or t.name > past:
                o = _layer(row, exact, patterns, t.name)
                yield _gone_view(row, t, o) if isinstance(t, SeenTool) else _view(row, t, o)


async def _overrides(repo: ToolCatalogRepo, toolset_id: str) -> tuple[dict[str, OverrideRow], list[OverrideRow]]:
    """The toolset's overrides: by exact key, and those stored under a pattern."""
    stored = await repo.overrides(toolset_id)
    return ({k: o for k, o in stored.items() if not is_pattern(k)},
            [o for k, o in stored.items() if is_pattern(k)])


async def _servers_and_overrides(db: Database) -> Servers:
    repo = ToolCatalogRepo(db)
    rows = await McpServerRepo(db).all()
    overrides = {ts: await _overrides(repo, ts) for ts in dict.fromkeys(r.toolset_id for r in rows)}
    vanished: dict[str, list[SeenTool]] = {}
    for v in await McpToolsSeenRepo(db).vanished():
        vanished.setdefault(v.key, []).append(v)
    return [(row, *overrides[row.toolset_id], vanished.get(row.key, [])) for row in rows]


def _gone_view(row: McpServerRow, seen: SeenTool, o: Layered | None) -> Tool:
    """A tool its connected server no longer lists, from the definition it last gave: shown
    unavailable with its override, never run (seed 002)."""
    d = seen.definition
    tool = _view(row, McpTool(name=seen.name, title=d.get("title"), description=d.get("description") or "",
                              input_schema=d.get("inputSchema") or {}, output_schema=d.get("outputSchema"),
                              annotations=d.get("annotations")), o)
    return msgspec.structs.replace(
        tool, enabled=False, status="unavailable",
        unavailable_reason=f"the MCP server {row.key} no longer lists it (last listed {seen.seen_at})")


async def _server_and_override(db: Database, ref: str, name: str) -> tuple[McpServerRow, Layered | None]:
    """The server and the tool's overrides, its exact one layered over the patterns that match it."""
    row = await find(McpServerRepo(db), ref)
    exact, patterns = await _overrides(ToolCatalogRepo(db), row.toolset_id)
    return row, _layer(row, exact, patterns, name)


async def resolve(db: Database, host: McpHost | None, ref_id: str) -> Resolved:
    ref, name = parse_id(ref_id)
    # On every MCP call's path: read once per change of the catalog.
    row, override = await db.cached(CATALOG, ("mcp", ref, name), lambda: _server_and_override(db, ref, name))
    found = next((t for t in host.tools(row.key) if t.name == name), None) if host else None
    if found is None and host is not None and row.should_run:
        await host.settle(row.key)  # restarting after a crash: its tools are back in a moment
        found = next((t for t in host.tools(row.key) if t.name == name), None)
    if found is None and row.toolset_deleted_at is not None:
        raise NotFound("tool", ref_id, f"{ref_id}: {frozen.deleted_tool_message(row.toolset_id)}")
    if found is None and host is not None and _connected(host, row.key):
        gone = next((v for v in await McpToolsSeenRepo(db).vanished() if v.key == row.key and v.name == name), None)
        if gone is not None:  # shown (tools/get) and overridable, never run: the call path refuses it
            return Resolved(_gone_view(row, gone, override), McpConfig(server_key=row.key, tool_name=name),
                            None, switched_on=switched_on(override.override if override else None))
    if found is None:
        status = _status(host, row)
        hint = ": sign in to it with mcpServers/login" if status == "needsAuth" else ""
        raise NotFound("tool", ref_id, f"the MCP server {row.key} ({status}) has no tool {name!r} "
                                       f"right now{hint}")
    # On every call's path: the view is rebuilt only when one of what it is made of was replaced
    # (stored rows are read anew after a catalog change, a server's tools after it lists them).
    hit = _resolved.get(ref_id)
    if hit is not None and hit[0] is row and hit[1] is override and hit[2] is found:
        return hit[3]
    if len(_resolved) >= 1024:
        _resolved.clear()
    tool = _view(row, found, override)
    # Its output as the toolset declares it for this tool (toolset.yaml tool_output), if it does.
    output = tool_output.of_config({"output": row.tool_output.get(name)})
    config = McpConfig(output=output, server_key=row.key, tool_name=name)
    target = Resolved(tool, config, None, switched_on=switched_on(override.override if override else None))
    _resolved[ref_id] = (row, override, found, target)
    return target


_resolved: dict[str, tuple[McpServerRow, Layered | None, McpTool, Resolved]] = {}


def _connected(host: McpHost, key: str) -> bool:
    try:
        return host.state(key).status == "connected"
    except KeyError:  # not handed to the host yet
        return False


def _status(host: McpHost | None, row: McpServerRow) -> str:
    if host is None:
        return "disconnected"
    try:
        return host.state(row.key).status
    except KeyError:  # not handed to the host yet (added a moment ago), as McpServers.view says
        return "connecting" if row.should_run else "disabled"


def override_key(toolset_id: str, ref_id: str) -> str:
    """The ``server:tool`` key an MCP tool's override is stored under in its toolset."""
    ref, name = parse_id(ref_id)
    server = ref.partition("~")[2] if "~" in ref else ref
    if "~" in ref and ref.partition("~")[0] != toolset_id:
        raise NotFound("tool", ref_id, f"{ref_id!r} does not belong to toolset {toolset_id!r}")
    return f"{server}:{name}"

"""toolsets/inspect: what installing a bundle would add, with every secret masked; it installs
and runs nothing (ZIP and folder are read, their Python is parsed, never imported: the service
reads the bundle, this describes it)."""

from __future__ import annotations

from .. import secrets
from ..api.toolsets import (
    BundleFile,
    BundleVariable,
    ConfigField,
    InspectedServer,
    InspectedTool,
    InspectResult,
    ManifestInfo,
)
from ..mcp_host.config import sandbox_of
from ..sandbox.hints import warnings_of
from ..tools import limits
from ..tools.config_schema import ConfigSchema
from . import bundle
from .manifest import McpServerDecl


def inspect(b: bundle.Bundle, mechanism: str | None = None) -> InspectResult:
    """``mechanism``: what confines tools here, for the limits it cannot enforce as the manifest asks."""
    m = b.manifest
    renderers = {o.tool_id: o.renderer for o in b.parsed.overrides if o.renderer}
    # Seed 004: what each Python tool's manifest settings allow beyond the defaults, before install.
    tool_limits = {t.id: limits.view([("manifest", b.parsed.limits), ("manifest", b.parsed.tool_limits.get(t.id))],
                                     f"{m.id}:{t.id}", mechanism) for t in m.tools if t.http is None}
    widened = [f"{w.tool_id}: {w.message} ({w.setting})" for v in tool_limits.values() for w in v.warnings]
    # The stdio servers the manifest puts in the sandbox, and what their sandbox allows.
    server_limits = {s.id: warnings_of(c, mechanism=mechanism, server=s.id) for s in m.mcp_servers
                     if (c := sandbox_of(s.sandbox)) is not None}
    widened += [f"MCP server {w.server}: {w.message} ({w.setting})" for ws in server_limits.values() for w in ws]
    return InspectResult(
        manifest=ManifestInfo(m.id, m.name, m.version, m.description, m.manifest_version),
        source_type="local" if b.source_type == "local" else "zip",
        tools=[
            InspectedTool(
                id=f"{m.id}:{t.id}", name=t.name or t.id, description=t.description or "",
                entrypoint=t.entrypoint, requires_confirmation=t.requires_confirmation,
                request=f"{t.http.requests()[0].method} {t.http.requests()[0].url_template}" if t.http else None,
                renderer=renderers.get(t.id), timeout=t.timeout, config_schema=_fields(t.config_schema),
                schedule=t.trigger.schedule if t.trigger is not None and t.trigger.type == "cron" else None,
                limits=tool_limits.get(t.id),
                limit_warnings=tool_limits[t.id].warnings if t.id in tool_limits else [],
            )
            for t in m.tools
        ],
        mcp_servers=[
            InspectedServer(
                id=s.id, type=s.type,
                command=secrets.masked_command(s.command, s.args),
                url=secrets.mask_url(s.url) if s.url else None, cwd=s.cwd,
                env=secrets.mask_map(s.env), headers=secrets.mask_map(s.headers),
                sandbox=s.sandbox,
                limit_warnings=server_limits.get(s.id, []),
            )
            for s in m.mcp_servers
        ],
        files=[BundleFile(path, bundle.kind_of(path), len(data)) for path, data in sorted(b.files.items())],
        warnings=[*b.warnings, *widened],
        config_schema=_fields(m.config_schema),
        variables=_variables(m.mcp_servers),
    )


def _variables(servers: list[McpServerDecl]) -> list[BundleVariable]:
    """Each ${NAME} the servers refer to, with the servers that do (whether it is set: the service's)."""
    used: dict[str, list[str]] = {}
    for s in servers:
        for text in (*s.args, s.url or "", *s.env.values(), *s.headers.values()):
            for name in secrets.references(text):
                if s.id not in used.setdefault(name, []):
                    used[name].append(s.id)
    return [BundleVariable(name=name, set=False, used_by=ids) for name, ids in used.items()]


def _fields(schema: ConfigSchema) -> list[ConfigField]:
    return [ConfigField(key=key, description=f.description, type=f.type, secret=f.secret, required=f.required,
                        default=f.default) for key, f in schema.items()]

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio.to_thread

from ..api.errors import InvalidBundle
from ..api.toolsets import (
    BundleFile,
    InspectedServer,
    InspectedTool,
    InspectParams,
    InspectResult,
    ManifestInfo,
)
from ..rpc import RequestContext

if TYPE_CHECKING:
    from ..app import Sidecar


def handlers(app: Sidecar) -> dict[str, Any]:
    async def inspect(p: InspectParams, ctx: RequestContext) -> InspectResult:
        from ..toolsets import bundle, secrets  # yaml and ast: loaded on first use

        try:
            b = await anyio.to_thread.run_sync(bundle.read, p.path)
        except bundle.BundleError as exc:
            raise InvalidBundle(exc.path, exc.reason) from None
        m = b.manifest
        renderers = {o.tool_id: o.renderer for o in b.parsed.overrides if o.renderer}
        return InspectResult(
            manifest=ManifestInfo(m.id, m.name, m.version, m.description, m.manifest_version),
            source_type=b.source_type,  # type: ignore[arg-type]
            tools=[
                InspectedTool(
                    id=f"{m.id}:{t.id}", name=t.name or t.id, description=t.description or "",
                    entrypoint=t.entrypoint, requires_confirmation=t.requires_confirmation,
                    renderer=renderers.get(t.id), timeout=t.timeout,
                )
                for t in m.tools
            ],
            mcp_servers=[
                InspectedServer(
                    id=s.id, type=s.type,
                    command=[s.command, *secrets.mask_args(s.args)] if s.command else None,
                    url=secrets.mask_url(s.url) if s.url else None, cwd=s.cwd,
                    env=secrets.mask_map(s.env), headers=secrets.mask_map(s.headers),
                )
                for s in m.mcp_servers
            ],
            files=[BundleFile(path, bundle.kind_of(path), len(data))  # type: ignore[arg-type]
                   for path, data in sorted(b.files.items())],
            warnings=b.warnings,
        )

    return {"toolsets/inspect": inspect}

"""Toolsets made for the search tests: HTTP tools (no code to run, nothing is called) with the
names and descriptions a test needs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from sidecar.client import SidecarClient


def http_toolset(root: Path, toolset_id: str, tools: dict[str, str]) -> Path:
    """A toolset folder whose tools are ``{tool id: description}``."""
    folder = root / toolset_id
    folder.mkdir(parents=True)
    manifest = {
        "manifest_version": "1", "id": toolset_id, "name": toolset_id.title(), "version": "1.0.0",
        "description": f"the {toolset_id} tools",
        "tools": [{"id": name, "description": description,
                   "http": {"urlTemplate": "https://api.example.com/x", "allowedHosts": ["api.example.com"]}}
                  for name, description in tools.items()],
    }
    (folder / "toolset.yaml").write_text(msgspec.json.encode(manifest).decode())  # JSON is YAML
    return folder


async def install(client: SidecarClient, root: Path, toolset_id: str, tools: dict[str, str]) -> None:
    await client.request("toolsets/import", {"path": str(http_toolset(root, toolset_id, tools))})


async def hits(client: SidecarClient, q: str, **params: Any) -> list[tuple[str, str]]:
    """(tool id, match) of every hit, all pages read."""
    found: list[tuple[str, str]] = []
    token = None
    while True:
        page = await client.request("tools/search", {"q": q, **params} | ({"pageToken": token} if token else {}))
        found += [(h["tool"]["id"], h["match"]) for h in page["hits"]]
        token = page.get("nextPageToken")
        if token is None:
            return found

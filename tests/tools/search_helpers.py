"""Toolsets made for the search tests: HTTP tools (no code to run, nothing is called) with the
names and descriptions a test needs."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import msgspec

from sidecar import compose
from sidecar.client import SidecarClient
from sidecar.compose import Services
from sidecar.handlers.notify import Notifier
from sidecar.settings import Settings
from sidecar.store import Database
from tests.timing import scaled


def _tool(name: str, spec: str | tuple[str, dict[str, Any]]) -> dict[str, Any]:
    description, schema = (spec, None) if isinstance(spec, str) else spec
    return {"id": name, "description": description, **({"input_schema": schema} if schema else {}),
            "http": {"urlTemplate": "https://api.example.com/x", "allowedHosts": ["api.example.com"]}}


def http_toolset(root: Path, toolset_id: str, tools: dict[str, Any]) -> Path:
    """A toolset folder whose tools are ``{tool id: description}`` (or ``(description, inputSchema)``)."""
    folder = root / toolset_id
    folder.mkdir(parents=True, exist_ok=True)
    manifest = {
        "manifest_version": "1", "id": toolset_id, "name": toolset_id.title(), "version": "1.0.0",
        "description": f"the {toolset_id} tools",
        "tools": [_tool(name, spec) for name, spec in tools.items()],
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


class Peer:
    """A UI end nobody is at: counts the notifications by method, asks nothing back."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self._news = anyio.Event()

    async def notify(self, method: str, params: Any = None) -> None:
        self.counts[method] = self.counts.get(method, 0) + 1
        self._news.set()
        self._news = anyio.Event()

    async def until(self, check: Callable[[], bool], limit: float = 30) -> None:
        """Wait, notification by notification, until ``check()`` holds."""
        with anyio.fail_after(scaled(limit)):
            while not check():
                await self._news.wait()

    async def request(self, method: str, params: Any = None, result_type: Any = Any) -> Any:
        raise AssertionError(f"unexpected request {method}")


@asynccontextmanager
async def built(data_dir: Path) -> AsyncIterator[tuple[Services, Peer]]:
    """The sidecar's services over a real database, as ``compose`` builds them (to reach what the
    wire does not show: the lexical ranker)."""
    settings = Settings(data_dir=data_dir, secrets_backend="file")
    db = await Database.open(settings.db_path)
    closers: list[Callable[[], Any]] = []
    peer = Peer()
    try:
        async with anyio.create_task_group() as tg:
            services = await compose.build(settings, db, Notifier(peer), tg,  # type: ignore[arg-type]  # a peer's duck
                                           lambda _n, fn: closers.append(fn), time.time())
            try:
                yield services, peer
            finally:
                with anyio.CancelScope(shield=True):
                    for close in reversed(closers):
                        await close()
                tg.cancel_scope.cancel()
    finally:
        await db.close()


async def install_into(services: Services, root: Path, toolset_id: str, tools: dict[str, Any]) -> None:
    """``tools``: ``{tool id: description}`` or ``{tool id: (description, inputSchema)}``."""
    await services.toolsets.install(str(http_toolset(root, toolset_id, tools)))

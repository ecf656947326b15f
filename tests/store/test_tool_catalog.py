"""The tool catalog's repositories over a real SQLite file: named rows, user overrides that
outlive upgrades, and a catalog read that is cached until a write changes it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from sidecar.mcp_host.host import McpHost
from sidecar.store import Database
from sidecar.store.permissions import PermissionRepo
from sidecar.store.tool_catalog import ToolCatalogRepo
from sidecar.store.toolsets import Install, OverrideRow, StoredTool, ToolsetFile, ToolsetRepo, ToolsetRow
from sidecar.tools.catalog import Catalog
from sidecar.tools.resolved import PythonConfig

pytestmark = pytest.mark.anyio

NOW = "2026-11-22T00:00:00Z"


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    db = await Database.open(tmp_path / "s.db")
    try:
        yield db
    finally:
        await db.close()


def install(version: str, *, renderer: str = "code") -> Install:
    return Install(
        toolset=ToolsetRow(id="ts", name="TS", version=version, description="", enabled=True, user_mcp=False,
                           source_type="local", source_ref="/src", installed_at=NOW, files_dir="/rev"),
        manifest_version="1", updated_at=NOW,
        files=[ToolsetFile(path="tools/a.py", kind="python", sha256="0" * 64, size=3, stored_path="/rev/tools/a.py")],
        tools=[StoredTool(tool_id="ts:a", name="A", description="does a", entrypoint="a:run",
                          input_schema={"type": "object"}, requires_confirmation=False, config={"timeout": 5})],
        overrides=[OverrideRow(tool_id="ts:a", renderer=renderer, renderer_config={"file": "$args.p"},
                               origin="manifest")],
        servers=[])


async def test_an_install_reads_back_as_named_rows(db: Database):
    repo = ToolsetRepo(db)
    await repo.write_install(install("1"), replace=False)
    row = await repo.get("ts")
    assert row is not None and (row.version, row.enabled, row.source_type) == ("1", True, "local")
    assert [f.path for f in await repo.files("ts")] == ["tools/a.py"]
    (tool,) = await repo.tools("ts")
    assert (tool.entrypoint, tool.config, tool.input_schema) == ("a:run", {"timeout": 5}, {"type": "object"})
    (stored,) = await ToolCatalogRepo(db).of_toolset("ts")
    assert stored.override is not None and stored.override.origin == "manifest"
    assert stored.toolset_enabled is True and stored.files_dir == "/rev"


async def test_the_users_override_outlives_an_upgrade_and_the_manifests_does_not(db: Database):
    repo = ToolsetRepo(db)
    await repo.write_install(install("1"), replace=False)
    await ToolCatalogRepo(db).set_override("ts", "ts:a", {"name_override": "Mine"})
    await repo.write_install(install("2", renderer="document"), replace=True)
    (o,) = await repo.overrides("ts")
    assert (o.origin, o.name_override, o.renderer) == ("user", "Mine", "code")  # the user's row, untouched


async def test_a_catalog_read_is_kept_until_a_write_changes_the_catalog(db: Database):
    await ToolsetRepo(db).write_install(install("1"), replace=False)
    catalog = Catalog(db, McpHost())
    first = await catalog.resolve("ts:a")
    assert await catalog.resolve("ts:a") is first  # read once per change
    # Its runner's config, decoded once with the row: the entrypoint importable in the worker (seed 000 §4.1).
    assert isinstance(first.config, PythonConfig) and first.config.entrypoint == "tools.a:run"
    await ToolCatalogRepo(db).set_override("ts", "ts:a", {"enabled": False})
    again = await catalog.resolve("ts:a")
    assert again is not first and again.tool.enabled is False and again.switched_on is False
    await ToolsetRepo(db).set_enabled("ts", False, NOW)
    await ToolCatalogRepo(db).set_override("ts", "ts:a", {"enabled": None})
    off = await catalog.resolve("ts:a")
    assert off.tool.enabled is False and off.switched_on is True  # only the toolset is off


async def test_grants_are_named_by_tool_and_bound_to_a_digest(db: Database):
    repo = PermissionRepo(db)
    assert await repo.always("t") is None
    await repo.grant_always("t", "d1")
    await repo.grant_always("t", "d2")
    assert await repo.always("t") == "d2"
    async with db.write() as w:
        await w.execute("INSERT INTO chats (id, created_at, updated_at) VALUES ('c', ?, ?)", (NOW, NOW))
    await repo.grant_chat("c", "t", "d3")
    await repo.grant_chat("gone", "t", "d4")  # a chat deleted meanwhile: nothing to write
    assert await repo.chat_grants("c") == {"t": "d3"}
    assert await repo.chat_grants("gone") == {}

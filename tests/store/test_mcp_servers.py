"""The MCP-server repository over a real SQLite file: rows in, named rows out."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import msgspec
import pytest

from sidecar.api.mcp import ServerSandbox
from sidecar.mcp_host.servers import config_of
from sidecar.store import CATALOG, Database
from sidecar.store.mcp_servers import AmbiguousServer, McpServerRepo, McpServerRow, insert
from sidecar.toolsets.manifest import McpServerDecl

pytestmark = pytest.mark.anyio

NOW = "2026-11-22T00:00:00Z"


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    db = await Database.open(tmp_path / "s.db")
    async with db.write(CATALOG) as w:
        for toolset_id, enabled, user in (("docs", 1, 0), ("web", 0, 0), ("solo", 1, 1)):
            await w.execute("INSERT INTO toolsets (id, name, enabled, user_mcp, installed_at, updated_at, "
                            "source_type) VALUES (?, ?, ?, ?, ?, ?, 'local')", (toolset_id, toolset_id, enabled, user,
                                                                                 NOW, NOW))
        await insert(w, [
            McpServerDecl(id="search", command="srv", args=["--token", "${TOKEN}"], env={"A": "1"},
                          call_timeout=5).row("docs"),
            McpServerDecl(id="fetch", type="streamable-http", url="https://x.test/mcp",
                          headers={"Authorization": "Bearer ${T}"}, requires_confirmation=True).row("docs"),
            McpServerDecl(id="search", type="sse", url="https://y.test/sse").row("web"),
            McpServerDecl(id="solo", command="solo").row("solo"),
        ], NOW)
    try:
        yield db
    finally:
        await db.close()


async def test_rows_come_back_named_and_typed(db: Database):
    repo = McpServerRepo(db)
    rows = await repo.all()
    assert [r.key for r in rows] == ["docs~search", "docs~fetch", "solo~solo", "web~search"]
    search = rows[0]
    assert isinstance(search, McpServerRow)
    assert (search.type, search.command, search.args, search.env) == ("stdio", "srv", ["--token", "${TOKEN}"],
                                                                      {"A": "1"})
    assert (search.call_timeout, search.connect_timeout, search.sandbox) == (5, None, None)
    assert search.should_run and not search.user_mcp
    fetch = rows[1]
    assert fetch.headers == {"Authorization": "Bearer ${T}"} and fetch.requires_confirmation
    web = rows[3]
    assert web.enabled and not web.toolset_enabled and not web.should_run  # its toolset is off
    assert (await repo.find("solo")) == rows[2] and rows[2].user_mcp
    assert [r.server_id for r in await repo.of_toolset("docs")] == ["search", "fetch"]  # manifest order


async def test_finding_by_key_or_bare_id(db: Database):
    repo = McpServerRepo(db)
    assert (await repo.find("web~search")) is not None
    assert await repo.find("nope") is None and await repo.find("docs~nope") is None
    with pytest.raises(AmbiguousServer) as err:
        await repo.find("search")
    assert err.value.keys == ["docs~search", "web~search"]


async def test_switching_a_server_off_and_what_the_host_gets(db: Database):
    repo = McpServerRepo(db)
    await repo.set_enabled("docs", "search", False)
    row = await repo.find("docs~search")
    assert row is not None and not row.enabled and not row.should_run
    config = config_of(row)
    assert (config.key, config.enabled, config.args, config.call_timeout) == ("docs~search", False,
                                                                              ("--token", "${TOKEN}"), 5.0)


async def test_the_options_column_keeps_the_shape_older_versions_wrote(db: Database):
    """Timeouts, log level, sandbox and tool_output in ``options``, each only when set: a downgrade
    reads what this version writes."""
    repo = McpServerRepo(db)
    row = await repo.find("docs~search")
    assert row is not None
    await repo.update(msgspec.structs.replace(row, log_level="warning", sandbox=ServerSandbox(processes=8),
                                              tool_output={"find": {"ephemeral": True}}))
    (options,) = (await db.fetchall("SELECT options FROM toolset_mcp_servers WHERE id = 'search' "
                                    "AND toolset_id = 'docs'"))[0]
    assert msgspec.json.decode(options) == {"call_timeout": 5, "log_level": "warning",
                                            "tool_output": {"find": {"ephemeral": True}},
                                            "sandbox": {"processes": 8}}


async def test_rows_written_by_older_versions_still_load(db: Database):
    """The older ``sandboxed: true``, a block that no longer reads, and values past bounds made
    stricter since: a stored server is read as it was written, never refused."""
    async with db.write(CATALOG) as w:
        await w.execute(
            "UPDATE toolset_mcp_servers SET options = ?, args = ?, headers = ? WHERE id = 'search' "
            "AND toolset_id = 'docs'",
            ('{"sandboxed": true, "connect_timeout": 900, "tool_output": {"find": {"card": {"enabled": true}}}}',
             msgspec.json.encode(["x"] * 2000).decode(), '{"X-Old": "a\\r\\nb"}'))
        await w.execute("UPDATE toolset_mcp_servers SET options = ? WHERE id = 'solo'",
                        ('{"sandbox": {"memory": [1], "network": "everywhere"}}',))
    repo = McpServerRepo(db)
    old = await repo.find("docs~search")
    assert old is not None
    assert old.sandbox == ServerSandbox(network="full") and old.connect_timeout == 900 and len(old.args) == 2000
    assert old.tool_output == {"find": {"card": {"enabled": True}}} and old.headers == {"X-Old": "a\r\nb"}
    assert config_of(old).sandbox is not None  # confined, with the network it had
    unreadable = await repo.find("solo")
    assert unreadable is not None and unreadable.sandbox == ServerSandbox()  # seed 004's defaults, never wider

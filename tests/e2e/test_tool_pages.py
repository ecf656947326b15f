"""tools/list pages and usage through a real ``python -m sidecar`` with a real MCP server."""

from __future__ import annotations

from pathlib import Path

import pytest

from sidecar.client import SidecarClient
from tests.tools.test_tool_pages import add_server, every, ids, install

pytestmark = pytest.mark.anyio


async def test_paging_the_catalog_and_the_usage_a_user_sees(sidecar: SidecarClient, tmp_path: Path):
    await install(sidecar, tmp_path, "notes", ["jot", "list_all"])
    await add_server(sidecar, "basic")
    first = await sidecar.request("tools/list", {"pageSize": 5})
    assert len(first["tools"]) == 5 and first["nextPageToken"]
    await install(sidecar, tmp_path, "zeta", ["last"])  # arrives while the user pages
    walked = first["tools"] + await every(sidecar, "tools/list", "tools", pageSize=5,
                                          **{"pageToken": first["nextPageToken"]})
    assert ids(walked) == sorted(set(ids(walked))) and {"notes:jot", "mcp:basic~basic:echo", "zeta:last"} <= set(
        ids(walked))

    await sidecar.request("tools/call", {"toolId": "notes:jot"})
    await sidecar.request("tools/call", {"toolId": "mcp:basic~basic:add", "args": {"a": 1, "b": 2}})
    tools = {t["id"]: t for t in await every(sidecar, "tools/list", "tools", toolsetIds=["notes", "basic"])}
    assert tools["notes:jot"]["callCount"] == 1 and tools["mcp:basic~basic:add"]["callCount"] == 1
    assert "callCount" not in tools["notes:list_all"]  # never ran: 0, left out
    got = (await sidecar.request("tools/get", {"id": "mcp:basic~basic:add"}))["tool"]
    assert got["callCount"] == 1 and got["lastCalledAt"].endswith("Z")

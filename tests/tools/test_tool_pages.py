"""tools/list, toolsets/list, chats/list and mcpServers/list a page at a time: every item once,
also when items are added between two pages, filters kept, wrong tokens refused; and usage."""

from __future__ import annotations

import base64
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from sidecar.api.tools import Tool
from sidecar.client import RemoteError, SidecarClient
from sidecar.tools.listing import ToolQuery
from tests.timing import scaled

pytestmark = pytest.mark.anyio

MCP = Path(__file__).resolve().parents[1] / "fixtures" / "mcp"


def python_toolset(root: Path, toolset_id: str, names: list[str]) -> Path:
    """A folder toolset of Python tools that each return their own name."""
    folder = root / toolset_id
    (folder / "tools").mkdir(parents=True)
    (folder / "tools" / "fns.py").write_text("from covalt_toolset import tool\n\n" + "".join(
        f"@tool\ndef {n}() -> str:\n    return {n!r}\n\n" for n in names))
    (folder / "toolset.yaml").write_text(
        f'manifest_version: "1"\nid: {toolset_id}\nname: {toolset_id.title()}\nversion: "1"\ntools:\n'
        + "".join(f"  - id: {n}\n    entrypoint: tools.fns:{n}\n" for n in names))
    return folder


async def install(sc: SidecarClient, root: Path, toolset_id: str, names: list[str]) -> None:
    await sc.request("toolsets/import", {"path": str(python_toolset(root, toolset_id, names))})


async def add_server(sc: SidecarClient, server_id: str) -> None:
    await sc.request("mcpServers/add", {"id": server_id, "command": sys.executable, "args": [str(MCP / "basic.py")]})
    key = f"{server_id}~{server_id}"
    with anyio.fail_after(scaled(30)):
        while True:
            server = next(s for s in await every(sc, "mcpServers/list", "servers") if s["id"] == key)
            if server["status"] in ("connected", "error"):
                assert server["status"] == "connected", server
                return
            await anyio.sleep(0.05)


async def every(sc: SidecarClient, method: str, key: str, **params: Any) -> list[dict[str, Any]]:
    """Every page of a list, in order."""
    found: list[dict[str, Any]] = []
    token: str | None = None
    while True:
        page = await sc.request(method, params | ({"pageToken": token} if token else {}))
        found += page[key]
        token = page.get("nextPageToken")
        if token is None:
            return found


def ids(items: list[dict[str, Any]]) -> list[str]:
    return [i["id"] for i in items]


async def refused(sc: SidecarClient, method: str, params: dict[str, Any]) -> str:
    with pytest.raises(RemoteError) as e:
        await sc.request(method, params)
    assert e.value.code == -32602, e.value
    assert e.value.data["path"] in ("params.pageToken", "params.pageSize", "params.chatId"), e.value.data
    return e.value.message


# -- tools/list ---------------------------------------------------------------------------------


async def test_tools_pages_merge_stored_and_mcp_tools_by_id_and_hold_still_while_tools_arrive(
        app: SidecarClient, tmp_path: Path):
    await install(app, tmp_path, "mm", ["a1", "a2", "a3", "a4", "a5"])
    await add_server(app, "basic")
    whole = ids((await app.request("tools/list", {"pageSize": 500}))["tools"])
    assert "nextPageToken" not in await app.request("tools/list", {"pageSize": 500})
    assert whole == sorted(whole) and len(whole) == len(set(whole))
    assert {"mm:a1", "write_file", "mcp:basic~basic:echo"} <= set(whole)  # every provider, one order
    assert ids(await every(app, "tools/list", "tools", pageSize=3)) == whole

    first = await app.request("tools/list", {"pageSize": 4})
    assert len(first["tools"]) == 4
    # Tools added between the pages, sorting before the position, after it, and among the MCP tools.
    await install(app, tmp_path, "aa", ["early"])
    await install(app, tmp_path, "zz", ["late"])
    await add_server(app, "mcq")  # mcp:mcq~mcq:* sorts between mcp:basic~... and mm:...
    rest: list[dict[str, Any]] = []
    token = first["nextPageToken"]
    while token:
        page = await app.request("tools/list", {"pageSize": 4, "pageToken": token})
        rest += page["tools"]
        token = page.get("nextPageToken")
    seen = ids(first["tools"]) + ids(rest)
    assert len(seen) == len(set(seen)), "a tool was repeated"
    assert set(whole) <= set(seen), f"skipped: {set(whole) - set(seen)}"
    assert "aa:early" not in seen  # before the position: the next walk from the start shows it
    assert {"zz:late", "mcp:mcq~mcq:echo"} <= set(ids(rest))
    assert seen == sorted(seen)


async def test_a_wrong_page_token_or_size_is_invalid_params_naming_it(app: SidecarClient):
    chats = [await app.request("chats/create", {"title": str(i)}) for i in range(3)]
    assert chats
    other = (await app.request("chats/list", {"pageSize": 1}))["nextPageToken"]
    says = await refused(app, "tools/list", {"pageToken": other})
    assert "made by 'chats/list', not tools/list" in says
    assert "not a page token" in await refused(app, "tools/list", {"pageToken": "forged!!"})
    forged = base64.urlsafe_b64encode(b'["tools/list","x",[1]]').decode()
    assert "other filters" in await refused(app, "tools/list", {"pageToken": forged})
    token = (await app.request("tools/list", {"pageSize": 1}))["nextPageToken"]
    assert "other filters" in await refused(app, "tools/list", {"pageToken": token, "includeDisabled": True})
    await refused(app, "tools/list", {"pageSize": 0})
    await refused(app, "tools/list", {"pageSize": 501})
    await refused(app, "toolsets/list", {"pageToken": token})
    await refused(app, "chats/list", {"pageToken": token})
    await refused(app, "mcpServers/list", {"pageToken": token})
    chat = chats[0]["chat"]["id"]
    await refused(app, "tools/list", {"chatId": chat, "pageToken": token})
    assert (await app.request("tools/list", {"pageSize": 1, "pageToken": token}))["tools"]  # still good


async def test_tools_filter_by_toolset_and_enabled_state(app: SidecarClient, tmp_path: Path):
    await install(app, tmp_path, "one", ["a", "b"])
    await install(app, tmp_path, "two", ["c"])
    await add_server(app, "basic")
    listed = await every(app, "tools/list", "tools", toolsetIds=["one"], pageSize=1)
    assert ids(listed) == ["one:a", "one:b"]
    built_in = await every(app, "tools/list", "tools", toolsetIds=["builtin"])
    assert built_in and {t["provider"] for t in built_in} == {"builtin"}
    mcp = ids(await every(app, "tools/list", "tools", toolsetIds=["basic", "two"], pageSize=2))
    assert mcp[0] == "mcp:basic~basic:add" and mcp[-1] == "two:c" and all(i.startswith("mcp:") for i in mcp[:-1])

    await app.request("tools/setOverride", {"toolsetId": "one", "toolId": "a", "enabled": False})
    await app.request("tools/setOverride", {"toolsetId": "basic", "toolId": "mcp:basic~basic:echo", "enabled": False})
    await app.request("toolsets/setEnabled", {"id": "two", "enabled": False})
    shown = ids(await every(app, "tools/list", "tools", pageSize=2))
    assert "one:a" not in shown and "two:c" not in shown and "mcp:basic~basic:echo" not in shown
    assert "one:b" in shown and "mcp:basic~basic:add" in shown
    everything = await every(app, "tools/list", "tools", pageSize=2, includeDisabled=True)
    off = {t["id"] for t in everything if not t["enabled"]}
    assert {"one:a", "two:c", "mcp:basic~basic:echo"} <= off
    assert ids(await every(app, "tools/list", "tools", toolsetIds=["nope"])) == []


def test_the_tags_filter_keeps_a_tool_with_any_of_the_tags() -> None:
    def tool(*tags: str) -> Tool:
        return Tool(id="t", name="t", description="", provider="python", requires_confirmation=False,
                    enabled=True, tags=list(tags))

    q = ToolQuery(toolset_ids=None, tags=["net", "ops"], include_disabled=False)
    assert q.keeps(tool("ops")) and q.keeps(tool("x", "net"))
    assert not q.keeps(tool("x")) and not q.keeps(tool())
    assert ToolQuery(toolset_ids=None, tags=None, include_disabled=False).keeps(tool())


# -- the other lists ----------------------------------------------------------------------------


async def test_toolsets_pages_by_name_with_filters(app: SidecarClient, tmp_path: Path):
    for name in ("bravo", "delta", "foxtrot"):
        await install(app, tmp_path, name, ["x"])
    first = await app.request("toolsets/list", {"pageSize": 2})
    assert ids(first["toolsets"]) == ["bravo", "delta"]
    await install(app, tmp_path, "alpha", ["x"])  # before the position
    await install(app, tmp_path, "echo", ["x"])  # after it
    second = await app.request("toolsets/list", {"pageSize": 2, "pageToken": first["nextPageToken"]})
    assert ids(second["toolsets"]) == ["echo", "foxtrot"] and "nextPageToken" not in second
    assert ids((await app.request("toolsets/list"))["toolsets"]) == ["alpha", "bravo", "delta", "echo", "foxtrot"]

    await app.request("toolsets/setEnabled", {"id": "delta", "enabled": False})
    assert "delta" in ids((await app.request("toolsets/list"))["toolsets"])  # shown by default, to enable it
    assert "delta" not in ids(await every(app, "toolsets/list", "toolsets", includeDisabled=False, pageSize=1))
    assert ids(await every(app, "toolsets/list", "toolsets", toolsetIds=["echo", "alpha", "nope"],
                           pageSize=1)) == ["alpha", "echo"]


async def test_chats_page_newest_first_and_a_new_chat_is_not_repeated(app: SidecarClient):
    made = [(await app.request("chats/create", {"title": str(i)}))["chat"]["id"] for i in range(5)]
    first = await app.request("chats/list", {"pageSize": 2})
    assert ids(first["chats"]) == made[:-3:-1]
    newer = (await app.request("chats/create", {"title": "new"}))["chat"]["id"]
    rest: list[dict[str, Any]] = []
    token = first["nextPageToken"]
    while token:
        page = await app.request("chats/list", {"pageSize": 2, "pageToken": token})
        rest += page["chats"]
        token = page.get("nextPageToken")
    assert ids(rest) == made[2::-1]
    assert ids((await app.request("chats/list"))["chats"]) == [newer, *made[::-1]]


async def add_stopped(sc: SidecarClient, server_id: str) -> None:
    await sc.request("mcpServers/add", {"id": server_id, "command": sys.executable, "args": [str(MCP / "basic.py")]})
    await sc.request("mcpServers/setEnabled", {"id": f"{server_id}~{server_id}", "enabled": False})


async def test_mcp_servers_page_in_list_order(app: SidecarClient):
    for server in ("s1", "s2", "s3"):
        await add_stopped(app, server)
    first = await app.request("mcpServers/list", {"pageSize": 2})
    assert ids(first["servers"]) == ["s1~s1", "s2~s2"]
    await add_stopped(app, "s0")
    second = await app.request("mcpServers/list", {"pageSize": 2, "pageToken": first["nextPageToken"]})
    assert ids(second["servers"]) == ["s3~s3"] and "nextPageToken" not in second
    assert ids((await app.request("mcpServers/list"))["servers"]) == ["s0~s0", "s1~s1", "s2~s2", "s3~s3"]


# -- usage --------------------------------------------------------------------------------------


async def usage(sc: SidecarClient, tool_id: str) -> tuple[int, str | None]:
    got = (await sc.request("tools/get", {"id": tool_id}))["tool"]
    listed = next(t for t in await every(sc, "tools/list", "tools", includeDisabled=True) if t["id"] == tool_id)
    assert (listed.get("callCount", 0), listed.get("lastCalledAt")) == (got.get("callCount", 0),
                                                                       got.get("lastCalledAt"))
    return got.get("callCount", 0), got.get("lastCalledAt")


async def test_usage_counts_the_calls_that_ran_for_python_mcp_and_built_in_tools(app: SidecarClient, tmp_path: Path):
    await install(app, tmp_path, "py", ["hello"])
    await add_server(app, "basic")
    assert await usage(app, "py:hello") == (0, None)

    for _ in range(2):
        assert (await app.request("tools/call", {"toolId": "py:hello"}))["toolCall"]["result"] == "hello"
    count, last = await usage(app, "py:hello")
    assert count == 2 and last is not None

    done = (await app.request("tools/call", {"toolId": "mcp:basic~basic:echo", "args": {"text": "x"}}))["toolCall"]
    failed = (await app.request("tools/call", {"toolId": "mcp:basic~basic:fail", "args": {}}))["toolCall"]
    assert failed["status"] == "error"
    assert await usage(app, "mcp:basic~basic:echo") == (1, done["startedAt"])
    assert (await usage(app, "mcp:basic~basic:fail"))[0] == 1  # it ran, and failed: counted

    chat = (await app.request("chats/create", {"title": "c"}))["chat"]["id"]
    await app.request("tools/call", {"toolId": "write_file", "chatId": chat, "args": {"path": "a", "content": "b"}})
    assert (await usage(app, "write_file"))[0] == 1

    # Refused before it ran: the kill switch, a denied confirmation. Neither is counted.
    await app.request("settings/set", {"toolsEnabled": False})
    with pytest.raises(RemoteError):
        await app.request("tools/call", {"toolId": "py:hello"})
    await app.request("settings/set", {"toolsEnabled": True})
    app.handle("ui/confirmToolCall", lambda p: {"decision": "deny"})
    await app.request("chat/send", {"chatId": chat, "content": '/tool run_command {"command": "echo hi"}'})
    denied = (await app.request("toolCalls/list", {"confirmation": "userDenied"}))["toolCalls"]
    assert [c["toolId"] for c in denied] == ["run_command"]
    assert await usage(app, "run_command") == (0, None)
    assert (await usage(app, "py:hello"))[0] == 2

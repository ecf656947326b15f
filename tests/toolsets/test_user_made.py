"""Toolsets made in the UI (issue 14 parts 1-2): created empty, renamed, filled with HTTP tools put
under <slug, version>, several versions of one slug with one current, run from the "+" palette by
slug, exported and imported again; and what a user doing it wrong is told."""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from sidecar.client import RemoteError, SidecarClient
from tests.http_server import HttpServer, Response

pytestmark = pytest.mark.anyio

INVALID_PARAMS, NOT_FOUND, CONFLICT, PERMISSION_DENIED = -32602, -32010, -32011, -32012
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
EXAMPLE = FIXTURES / "toolsets" / "http_example"


def definition(server: HttpServer, path: str = "/items/${id}", **extra: Any) -> dict[str, Any]:
    return {"description": "Fetch one item", "tags": ["inventory", "read"],
            "inputSchema": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
            "http": {"urlTemplate": f"http://{server.netloc}{path}", "allowedHosts": ["127.0.0.1"]}, **extra}


async def put(app: SidecarClient, server: HttpServer, slug: str = "fetch-item", version: str = "1",
              toolset: str = "shop", **extra: Any) -> dict[str, Any]:
    got = await app.request("tools/put", {"toolsetId": toolset, "slug": slug, "version": version,
                                          "definition": definition(server, **extra)})
    return got["tool"]


async def error_of(app: SidecarClient, method: str, params: dict[str, Any]) -> RemoteError:
    with pytest.raises(RemoteError) as caught:
        await app.request(method, params)
    return caught.value


async def test_a_toolset_made_in_the_ui_holds_put_http_tools_that_run_by_slug(app, http_server: HttpServer):
    http_server.route("GET", "/items/a1", Response(json={"id": "a1", "name": "Lamp"}))
    made = (await app.request("toolsets/create", {"id": "shop", "name": "My shop", "description": "Items"}))["toolset"]
    assert (made["sourceType"], made["userMcp"], made["enabled"]) == ("user", False, True)
    assert made["createdAt"] == made["modifiedAt"]

    tool = await put(app, http_server)
    assert (tool["id"], tool["name"]) == ("shop:fetch-item.1", "fetch-item")  # no name given: the slug
    assert (tool["slug"], tool["version"], tool["tags"], tool["current"]) == ("fetch-item", "1", ["inventory", "read"],
                                                                            True)
    assert tool["provider"] == "http" and tool["status"] == "connected"
    assert tool["createdAt"] == tool["modifiedAt"]
    detail = await app.request("toolsets/get", {"id": "shop"})
    assert [t["id"] for t in detail["tools"]] == ["shop:fetch-item.1"]
    tagged = (await app.request("tools/list", {"tags": ["read"]}))["tools"]
    assert [t["id"] for t in tagged] == ["shop:fetch-item.1"]  # tools/list filters on the tags put
    assert detail["toolset"]["modifiedAt"] > made["modifiedAt"]  # a tool put is a structural change

    ran = (await app.request("tools/call", {"toolId": "+fetch-item", "args": {"id": "a1"}}))["toolCall"]
    assert (ran["toolId"], ran["status"]) == ("shop:fetch-item.1", "success")
    assert ran["result"] == {"id": "a1", "name": "Lamp"}
    assert http_server.requests_to("/items/a1")


async def test_a_pair_is_put_once_and_the_stored_tool_is_left_as_it_was(app, http_server: HttpServer):
    await app.request("toolsets/create", {"id": "shop", "name": "Shop"})
    first = await put(app, http_server)
    err = await error_of(app, "tools/put", {"toolsetId": "shop", "slug": "fetch-item", "version": "1",
                                            "definition": definition(http_server, "/other", description="changed")})
    assert err.code == CONFLICT and "'fetch-item' version '1' already" in err.message
    assert (await app.request("tools/get", {"id": first["id"]}))["tool"] == first
    # The same pair in another toolset is another tool (seed 002).
    await app.request("toolsets/create", {"id": "shop2", "name": "Shop 2"})
    other = await put(app, http_server, toolset="shop2")
    assert other["id"] == "shop2:fetch-item.1" and other["slug"] == first["slug"]


async def test_versions_of_one_slug_coexist_with_one_current_and_ids_never_move(app, http_server: HttpServer):
    http_server.route("GET", "/v1/a", Response(json="one"))
    http_server.route("GET", "/v2/a", Response(json="two"))
    await app.request("toolsets/create", {"id": "shop", "name": "Shop"})
    v1 = await put(app, http_server, path="/v1/${id}")
    v2 = await put(app, http_server, version="2.0", path="/v2/${id}")
    assert v2["id"] == "shop:fetch-item.2.0" and v2["current"]
    assert not (await app.request("tools/get", {"id": v1["id"]}))["tool"]["current"]

    async def run(ref: str) -> Any:
        return (await app.request("tools/call", {"toolId": ref, "args": {"id": "a"}}))["toolCall"]["result"]

    assert [await run(r) for r in ("+fetch-item", "+fetch-item@1", "+fetch-item@2.0")] == ["two", "one", "two"]
    chat = (await app.request("chats/create", {"title": "t"}))["chat"]["id"]
    offered = [t["id"] for t in (await app.request("tools/list", {"chatId": chat}))["tools"]]
    assert v2["id"] in offered and v1["id"] not in offered  # a turn offers the current version only

    await app.request("tools/setOverride", {"toolsetId": "shop", "toolId": v1["id"], "nameOverride": "Old fetch"})
    back = (await app.request("tools/setCurrent", {"toolsetId": "shop", "slug": "fetch-item", "version": "1"}))["tool"]
    assert (back["id"], back["current"], back["name"]) == (v1["id"], True, "Old fetch")  # the override follows its id
    assert await run("+fetch-item") == "one"

    await app.request("tools/delete", {"toolsetId": "shop", "slug": "fetch-item", "version": "1"})
    err = await error_of(app, "tools/get", {"id": v1["id"]})
    assert err.code == NOT_FOUND
    assert (await app.request("tools/get", {"id": v2["id"]}))["tool"]["current"]  # the one left is current
    err = await error_of(app, "tools/delete", {"toolsetId": "shop", "slug": "fetch-item", "version": "1"})
    assert err.code == NOT_FOUND and "has no 'fetch-item' version '1'" in err.message
    # Put again, the pair gets its id back, without the override the deleted tool had.
    again = await put(app, http_server, path="/v1/${id}")
    assert again["id"] == v1["id"] and again["name"] != "Old fetch"


@pytest.mark.parametrize(("slug", "says"), [
    ("get_item", "has '_'; use '-' instead"),
    ("get item", "has whitespace"),
    ("get/item", "has '/'"),
    ("fire🔥", "U+1F525 FIRE"),
    ("x" * 65, "is 65 characters long; the limit is 64"),
    ("abc\u202edef", "U+202E RIGHT-TO-LEFT OVERRIDE"),
    ("v1.0", "dots are allowed in versions only"),
])
async def test_bad_slugs_are_invalid_params_saying_what_to_fix(app, http_server: HttpServer, slug: str, says: str):
    await app.request("toolsets/create", {"id": "shop", "name": "Shop"})
    err = await error_of(app, "tools/put", {"toolsetId": "shop", "slug": slug, "version": "1",
                                            "definition": definition(http_server)})
    assert err.code == INVALID_PARAMS and err.data["path"] == "params.slug"
    assert says in err.data["reason"] and "a slug is letters, digits and '-'" in err.data["reason"]
    assert (await app.request("toolsets/get", {"id": "shop"}))["tools"] == []


@pytest.mark.parametrize(("version", "says"), [("1/2", "has '/'"), ("v 2", "whitespace"), ("1_0", "'_'"),
                                               ("2\u202e1", "RIGHT-TO-LEFT OVERRIDE")])
async def test_bad_versions_are_invalid_params(app, http_server: HttpServer, version: str, says: str):
    await app.request("toolsets/create", {"id": "shop", "name": "Shop"})
    err = await error_of(app, "tools/put", {"toolsetId": "shop", "slug": "fetch", "version": version,
                                            "definition": definition(http_server)})
    assert err.code == INVALID_PARAMS and err.data["path"] == "params.version" and says in err.data["reason"]


@pytest.mark.parametrize(("change", "path", "says"), [
    ({"http": {"urlTemplate": "ftp://x/", "allowedHosts": ["x"]}}, "params.definition.http.urlTemplate",
     "must start with http://"),
    ({"http": {"urlTemplate": "https://api.example.com/"}}, "params.definition.http.allowedHosts", "list the hosts"),
    ({"tags": ["ok", "a\u202eb"]}, "params.definition.tags[1]", "U+202E"),
    ({"configSchema": {"Bad Key": {}}}, "params.definition.configSchema.Bad Key",
     "not a valid field name"),
])
async def test_a_bad_definition_names_its_field(app, http_server: HttpServer, change: dict[str, Any], path: str,
                                                says: str):
    await app.request("toolsets/create", {"id": "shop", "name": "Shop"})
    err = await error_of(app, "tools/put", {"toolsetId": "shop", "slug": "fetch", "version": "1",
                                            "definition": {**definition(http_server), **change}})
    assert err.code == INVALID_PARAMS and err.data["path"] == path and says in err.data["reason"], err.data


async def test_create_and_update_refuse_what_they_cannot_do(app, http_server: HttpServer):
    await app.request("toolsets/create", {"id": "shop", "name": "Shop"})
    err = await error_of(app, "toolsets/create", {"id": "shop", "name": "Again"})
    assert err.code == CONFLICT and "already" in err.message
    for bad in ("my shop", "../x", "a:b", "", "-x"):
        err = await error_of(app, "toolsets/create", {"id": bad, "name": "x"})
        assert err.code == INVALID_PARAMS and err.data["path"] == "params.id", bad
    err = await error_of(app, "toolsets/create", {"id": "builtin", "name": "x"})
    assert err.code == INVALID_PARAMS and "ship with the sidecar" in err.data["reason"]
    err = await error_of(app, "toolsets/update", {"id": "nope", "name": "x"})
    assert err.code == NOT_FOUND

    await app.request("toolsets/import", {"path": str(EXAMPLE)})
    err = await error_of(app, "tools/put", {"toolsetId": "http_example", "slug": "x", "version": "1",
                                            "definition": definition(http_server)})
    assert err.code == PERMISSION_DENIED and "was imported" in err.message
    err = await error_of(app, "toolsets/update", {"id": "http_example", "name": "x"})
    assert err.code == PERMISSION_DENIED
    err = await error_of(app, "tools/delete", {"toolsetId": "builtin", "slug": "read-file", "version": "1"})
    assert err.code == PERMISSION_DENIED and "built-in tools are read-only" in err.message

    await app.request("toolsets/setEnabled", {"id": "shop", "enabled": False})
    err = await error_of(app, "tools/put", {"toolsetId": "shop", "slug": "x", "version": "1",
                                            "definition": definition(http_server)})
    assert err.code == CONFLICT and "enable it first" in err.message
    await app.request("toolsets/setEnabled", {"id": "shop", "enabled": True})
    await app.request("toolsets/delete", {"id": "shop"})  # soft: hidden, restorable
    err = await error_of(app, "tools/put", {"toolsetId": "shop", "slug": "x", "version": "1",
                                            "definition": definition(http_server)})
    assert err.code == CONFLICT and "restore it first" in err.message
    err = await error_of(app, "toolsets/create", {"id": "shop", "name": "Again"})
    assert err.code == CONFLICT and "a deleted toolset" in err.message


async def test_created_at_stays_and_modified_at_follows_structural_changes_only(app, http_server: HttpServer):
    made = (await app.request("toolsets/create", {"id": "shop", "name": "Shop", "enabled": False}))["toolset"]
    assert made["enabled"] is False
    switched = (await app.request("toolsets/setEnabled", {"id": "shop", "enabled": True}))["toolset"]
    assert switched["modifiedAt"] == made["modifiedAt"]  # switching is not a structural change
    renamed = (await app.request("toolsets/update", {"id": "shop", "name": "Shop 2"}))["toolset"]
    assert (renamed["name"], renamed["description"]) == ("Shop 2", "")
    assert renamed["createdAt"] == made["createdAt"] and renamed["modifiedAt"] > made["modifiedAt"]
    tool = await put(app, http_server)
    await app.request("tools/setOverride", {"toolsetId": "shop", "toolId": tool["id"], "enabled": False})
    after = (await app.request("tools/get", {"id": tool["id"]}))["tool"]
    assert (after["createdAt"], after["modifiedAt"]) == (tool["createdAt"], tool["modifiedAt"])


async def test_a_slug_in_several_toolsets_is_ambiguous_until_one_is_off(app, http_server: HttpServer):
    for toolset in ("shop", "store"):
        await app.request("toolsets/create", {"id": toolset, "name": toolset})
        await put(app, http_server, toolset=toolset)
    err = await error_of(app, "tools/call", {"toolId": "+fetch-item", "args": {"id": "a"}})
    assert err.code == INVALID_PARAMS and err.data["path"] == "params.toolId"
    assert "shop:fetch-item.1 (toolset shop" in err.data["reason"]
    assert "store:fetch-item.1 (toolset store" in err.data["reason"]
    await app.request("toolsets/setEnabled", {"id": "store", "enabled": False})
    http_server.route("GET", "/items/a", Response(json="from shop"))
    ran = (await app.request("tools/call", {"toolId": "+fetch-item", "args": {"id": "a"}}))["toolCall"]
    assert (ran["toolId"], ran["result"]) == ("shop:fetch-item.1", "from shop")
    err = await error_of(app, "tools/call", {"toolId": "+nothing-here", "args": {}})
    assert err.code == NOT_FOUND and "no tool has the slug 'nothing-here'" in err.message
    err = await error_of(app, "tools/call", {"toolId": "+fetch_item", "args": {}})
    assert err.code == INVALID_PARAMS and "use '-' instead" in err.data["reason"]


async def test_built_in_and_manifest_tools_have_slugs_too(app):
    builtin = (await app.request("tools/get", {"id": "read_file"}))["tool"]
    assert (builtin["slug"], builtin["version"], builtin["current"]) == ("read-file", "1", True)
    assert builtin["createdAt"] and builtin["modifiedAt"]
    await app.request("toolsets/import", {"path": str(EXAMPLE)})
    tool = (await app.request("tools/get", {"id": "http_example:get_item"}))["tool"]
    assert (tool["slug"], tool["version"], tool.get("tags")) == ("get-item", "1", None)  # no tags: left out


async def test_an_export_of_a_made_toolset_imports_again_with_its_versions(app, http_server: HttpServer,
                                                                           tmp_path: Path):
    await app.request("toolsets/create", {"id": "shop", "name": "Shop", "description": "Mine"})
    v1 = await put(app, http_server)
    v2 = await put(app, http_server, version="2")
    cafe = await put(app, http_server, slug="café", version="β")
    await app.request("tools/setCurrent", {"toolsetId": "shop", "slug": "fetch-item", "version": "1"})
    before = {t["id"]: t for t in (await app.request("toolsets/get", {"id": "shop"}))["tools"]}
    out = tmp_path / "shop.zip"
    await app.request("toolsets/export", {"id": "shop", "path": str(out)})
    manifest = yaml.safe_load(zipfile.ZipFile(out).read("toolset.yaml"))
    assert [(t["id"], t.get("slug"), t.get("version")) for t in manifest["tools"]] == [
        ("fetch-item.2", "fetch-item", "2"), ("fetch-item.1", "fetch-item", None),
        (cafe["id"].partition(":")[2], "café", "β")]

    await app.request("toolsets/uninstall", {"id": "shop"})
    back = (await app.request("toolsets/import", {"path": str(out)}))["toolset"]
    assert (back["name"], back["description"], back["sourceType"]) == ("Shop", "Mine", "zip")
    after = {t["id"]: t for t in (await app.request("toolsets/get", {"id": "shop"}))["tools"]}
    assert set(after) == {v1["id"], v2["id"], cafe["id"]}
    for tool_id, tool in after.items():
        kept = ("slug", "version", "tags", "current", "description", "inputSchema")
        assert {k: tool.get(k) for k in kept} == {k: before[tool_id].get(k) for k in kept}, tool_id
    assert after[v1["id"]]["current"] and not after[v2["id"]]["current"]


async def test_an_mcp_tools_slug_is_its_name_made_valid_and_the_palette_finds_it(app, http_server: HttpServer):
    await app.request("mcpServers/add", {"id": "basic", "command": sys.executable,
                                         "args": [str(FIXTURES / "mcp" / "basic.py")]})
    await app.wait_notification("mcpServers/status", lambda p: p["server"]["status"] == "connected", timeout=30)
    listed = {t["id"]: t for t in (await app.request("tools/list"))["tools"]}
    assert (listed["mcp:basic~basic:rpc_error"]["slug"], listed["mcp:basic~basic:rpc_error"]["version"]) == \
        ("rpc-error", "1")
    ran = (await app.request("tools/call", {"toolId": "+echo", "args": {"text": "hi"}}, timeout=30))["toolCall"]
    assert (ran["toolId"], ran["status"]) == ("mcp:basic~basic:echo", "success")
    # A tool of a toolset made in the UI with the same slug: now the palette asks which one.
    await app.request("toolsets/create", {"id": "shop", "name": "Shop"})
    await put(app, http_server, slug="echo")
    err = await error_of(app, "tools/call", {"toolId": "+echo", "args": {"text": "hi"}})
    assert err.code == INVALID_PARAMS
    assert "mcp:basic~basic:echo (toolset basic" in err.data["reason"] and "shop:echo.1 (toolset shop" in \
        err.data["reason"]


async def test_a_put_tool_is_found_by_search_under_its_slug_and_tags(app, http_server: HttpServer):
    await app.request("toolsets/create", {"id": "shop", "name": "Shop"})
    tool = await put(app, http_server, slug="grüße", tags=["inventaire"])
    hits = (await app.request("tools/search", {"q": "grüße"}))["hits"]
    assert hits[0]["tool"]["id"] == tool["id"] and hits[0]["match"] == "prefix"
    hits = (await app.request("tools/search", {"q": "inventaire"}))["hits"]
    assert [h["tool"]["id"] for h in hits] == [tool["id"]]
    await app.request("tools/delete", {"toolsetId": "shop", "slug": "grüße", "version": "1"})
    assert (await app.request("tools/search", {"q": "grüße"}))["hits"] == []

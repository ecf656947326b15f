"""HTTP tools (issue 13) through the app, against a real local HTTP server: the example toolset's
requests as the server receives them, results and their mapping, steps, outputSchema, secrets
kept out of results and errors, export, and the call record."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

import pytest

from sidecar.client import SidecarClient
from tests.http_server import HttpServer, Request, Response

pytestmark = pytest.mark.anyio

EXAMPLE = Path(__file__).resolve().parents[1] / "fixtures" / "toolsets" / "http_example"
KEY = "ek-7Hq2Zr9Lx4Pw1Nv6"  # distinct enough to grep for
PASSWORD = "pw-Jt5Kc8Rm3Qy0"



async def install(app: SidecarClient, server: HttpServer) -> None:
    await app.request("toolsets/import", {"path": str(EXAMPLE)})
    await app.request("config/set", {"toolsetId": "http_example", "values": {"api_host": server.netloc}})
    await app.request("secrets/set", {"name": "EXAMPLE_API_KEY", "value": KEY})


async def call(app: SidecarClient, tool: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
    got = await app.request("tools/call", {"toolId": f"http_example:{tool}", "args": args or {}})
    return got["toolCall"]


ITEM = {"id": "a1", "name": "Lamp", "price": 12.5}


async def test_get_item_sends_the_key_from_the_secret_store_and_selects_the_item(app, http_server: HttpServer):
    http_server.route("GET", "/items/a1", Response(json={"item": ITEM, "meta": {"v": 1}}))
    await install(app, http_server)
    record = await call(app, "get_item", {"id": "a1"})
    assert record["status"] == "success", record
    assert record["result"] == ITEM  # response.select: /item
    seen = http_server.requests[-1]
    assert seen.method == "GET" and seen.target == "/items/a1"
    assert seen.header("X-Api-Key") == KEY
    tool = (await app.request("tools/get", {"id": "http_example:get_item"}))["tool"]
    assert tool["provider"] == "http" and tool["status"] == "connected"
    assert tool["inputSchema"]["required"] == ["id"]


async def test_query_parameters_and_an_optional_argument_left_out(app, http_server: HttpServer):
    http_server.route("GET", "/items", Response(json=[ITEM]))
    await install(app, http_server)
    assert (await call(app, "search_items", {"q": "lamp & shade", "limit": 5}))["result"] == [ITEM]
    assert http_server.requests[-1].query == [("q", "lamp & shade"), ("limit", "5")]
    await call(app, "search_items", {"q": "desk"})
    assert http_server.requests[-1].query == [("q", "desk")]  # no limit= at all


async def test_a_json_body_keeps_the_arguments_types(app, http_server: HttpServer):
    http_server.route("POST", "/items", Response(201, json={"id": "n1"}))
    await install(app, http_server)
    record = await call(app, "create_item", {"name": 'Desk "XL"', "price": 99.5, "tags": ["wood", "big"]})
    assert record["status"] == "success" and record["result"] == {"id": "n1"}
    seen = http_server.requests[-1]
    assert seen.header("content-type") == "application/json"
    assert seen.json() == {"name": 'Desk "XL"', "price": 99.5, "tags": ["wood", "big"], "source": 'sidecar Desk "XL"'}
    await call(app, "create_item", {"name": "Chair", "price": 5})
    assert http_server.requests[-1].json() == {"name": "Chair", "price": 5, "source": "sidecar Chair"}  # no tags


async def test_steps_log_in_with_a_form_then_use_the_token(app, http_server: HttpServer):
    def login(request: Request) -> Response:
        form = dict(request.form())
        ok = form == {"user": "ada", "password": PASSWORD}
        return Response(json={"token": "tok-123"}) if ok else Response(401, json={"error": "bad login"})

    http_server.route("POST", "/login", handler=login)
    http_server.route("GET", "/orders", handler=lambda r: Response(
        json={"orders": [{"id": 1}]} if r.header("authorization") == "Bearer tok-123" else {"orders": []}))
    await install(app, http_server)
    tool = (await app.request("tools/get", {"id": "http_example:my_orders"}))["tool"]
    assert tool["status"] == "available" and tool["missingConfig"] == ["user", "password"]
    await app.request("config/set", {"toolsetId": "http_example", "toolId": "my_orders",
                                     "values": {"user": "ada", "password": PASSWORD}})
    record = await call(app, "my_orders")
    assert record["status"] == "success", record
    assert record["result"] == [{"id": 1}]
    login_seen = http_server.requests_to("/login")[-1]
    assert login_seen.header("content-type") == "application/x-www-form-urlencoded"
    # The record says which requests the call made, in order.
    assert [(r["method"], r["url"], r["status"]) for r in record["requests"]] == [
        ("POST", f"{http_server.url}/login", 200), ("GET", f"{http_server.url}/orders", 200)]
    assert all(r["durationMs"] >= 0 for r in record["requests"])


async def test_a_text_response(app, http_server: HttpServer):
    http_server.route("GET", "/items/a1/note", Response(body="fragile\nhandle with care",
                                                        headers={"Content-Type": "text/plain"}))
    await install(app, http_server)
    assert (await call(app, "item_note", {"id": "a1"}))["result"] == "fragile\nhandle with care"


async def test_a_result_that_breaks_the_output_schema_is_an_error_naming_the_path(app, http_server: HttpServer):
    http_server.route("GET", "/items/a1", Response(json={"item": {**ITEM, "price": "cheap"}}))
    await install(app, http_server)
    record = await call(app, "get_item", {"id": "a1"})
    assert record["status"] == "error" and record["errorKind"] == "badOutput"
    assert record["error"] == "result.price: expected number, got string"
    assert record["result"]["price"] == "cheap"  # the audit trail keeps what came back


async def test_an_error_status_is_an_error_result_with_the_servers_answer(app, http_server: HttpServer):
    http_server.route("GET", "/items/zz", Response(404, json={"error": "no item zz"}))
    await install(app, http_server)
    record = await call(app, "get_item", {"id": "zz"})
    assert record["status"] == "error" and record["errorKind"] == "upstream"
    assert record["error"].startswith(f"GET http://{http_server.netloc}/items/zz answered 404")
    assert record["result"] == {"status": 404, "body": {"error": "no item zz"}}
    assert len(http_server.requests_to("/items/zz")) == 1  # a 404 is not retried
    assert [(r["method"], r["url"], r["status"]) for r in record["requests"]] == [
        ("GET", f"{http_server.url}/items/zz", 404)]


async def test_the_recorded_request_masks_a_secret_in_the_url_and_a_refused_one_is_not_recorded_as_sent(
        app, http_server: HttpServer, tmp_path: Path):
    http_server.route("GET", "/feed", Response(json={"ok": True}))
    folder = tmp_path / "keyed"
    folder.mkdir()
    (folder / "toolset.yaml").write_text(json.dumps({"manifest_version": "1", "id": "keyed", "name": "Keyed", "tools": [
        {"id": "feed", "http": {"urlTemplate": f"{http_server.url}/feed?key=${{FEED_KEY}}",
                                "allowedHosts": ["127.0.0.1"]}},
        {"id": "elsewhere", "http": {"urlTemplate": "http://10.1.2.3/feed", "allowedHosts": ["127.0.0.1"]}}]}))
    await app.request("toolsets/import", {"path": str(folder)})
    await app.request("secrets/set", {"name": "FEED_KEY", "value": KEY})
    ok = (await app.request("tools/call", {"toolId": "keyed:feed", "args": {}}))["toolCall"]
    assert ok["status"] == "success" and http_server.requests[-1].query == [("key", KEY)]
    assert [(r["url"], r["status"]) for r in ok["requests"]] == [(f"{http_server.url}/feed?key=****", 200)]
    refused = (await app.request("tools/call", {"toolId": "keyed:elsewhere", "args": {}}))["toolCall"]
    assert refused["status"] == "error" and refused["errorKind"] == "refused"
    assert refused.get("requests") is None  # refused by name: nothing was sent


async def test_invalid_json_where_json_is_expected(app, http_server: HttpServer):
    http_server.route("GET", "/items/a1", Response(body="<html>oops</html>", headers={"Content-Type": "text/html"}))
    await install(app, http_server)
    record = await call(app, "get_item", {"id": "a1"})
    assert record["status"] == "error" and record["errorKind"] == "output"
    assert "did not answer with JSON" in record["error"] and "'<html>oops</html>'" in record["error"]
    assert "response.format: text" in record["error"]


async def test_a_secret_the_server_echoes_is_masked_in_results_errors_and_the_log(app, http_server: HttpServer):
    http_server.route("GET", "/items/a1", Response(json={"item": {**ITEM, "name": f"key was {KEY}"}}))
    http_server.route("GET", "/items/a2", Response(500, json={"error": f"bad key {KEY}"}))
    await install(app, http_server)
    ok = await call(app, "get_item", {"id": "a1"})
    assert ok["result"]["name"] == "key was ****"
    failed = await call(app, "get_item", {"id": "a2"})
    assert failed["status"] == "error" and KEY not in json.dumps(failed)
    assert failed["result"] == {"status": 500, "body": {"error": "bad key ****"}}


async def test_a_missing_secret_says_how_to_set_it_and_sends_nothing(app, http_server: HttpServer):
    http_server.route("GET", "/items/a1", Response(json={"item": ITEM}))
    await app.request("toolsets/import", {"path": str(EXAMPLE)})
    await app.request("config/set", {"toolsetId": "http_example", "values": {"api_host": http_server.netloc}})
    record = await call(app, "get_item", {"id": "a1"})
    assert record["status"] == "error" and record["errorKind"] == "unconfigured"
    assert "EXAMPLE_API_KEY is not set" in record["error"] and "secrets/set" in record["error"]
    assert http_server.requests == []


async def test_export_writes_the_http_block_back(app, http_server: HttpServer, tmp_path: Path):
    await install(app, http_server)
    out = tmp_path / "out.zip"
    await app.request("toolsets/export", {"id": "http_example", "path": str(out)})
    import yaml

    with zipfile.ZipFile(out) as z:
        manifest = yaml.safe_load(z.read("toolset.yaml"))
    tools = {t["id"]: t for t in manifest["tools"]}
    assert tools["get_item"]["http"]["urlTemplate"] == "http://${api_host}/items/${id}"
    assert tools["get_item"]["http"]["headers"] == {"X-Api-Key": "${EXAMPLE_API_KEY}"}
    assert "entrypoint" not in tools["get_item"]
    assert tools["my_orders"]["http"]["steps"][1]["headers"] == {"Authorization": "Bearer ${login.token}"}
    assert KEY not in json.dumps(manifest) and server_port(http_server) not in json.dumps(manifest)
    again = tmp_path / "again"
    with zipfile.ZipFile(out) as z:
        z.extractall(again)
    await app.request("toolsets/import", {"path": str(again), "replace": True})  # round trip


def server_port(server: HttpServer) -> str:
    return f":{server.port}"


async def test_overrides_apply_to_http_tools(app, http_server: HttpServer):
    http_server.route("GET", "/items/a1", Response(json={"item": ITEM}))
    await install(app, http_server)
    await app.request("tools/setOverride", {"toolsetId": "http_example", "toolId": "get_item",
                                            "renderer": "document", "rendererConfig": {"content": "$return.name"},
                                            "nameOverride": "Item"})
    tool = (await app.request("tools/get", {"id": "http_example:get_item"}))["tool"]
    assert tool["name"] == "Item" and tool["renderer"] == "document"
    record = await call(app, "get_item", {"id": "a1"})
    assert record["renderPlan"] == {"renderer": "document", "config": {"content": "Lamp"}}

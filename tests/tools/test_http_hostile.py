"""Hostile arguments and hostile servers against HTTP tools (issue 13), each against the real local
server: an argument must not change the path, query, headers or host; a huge, endless, trickling
or cut response, a 429, a dead port and a cancelled call each end the call with a clear error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml

from sidecar.client import SidecarClient
from tests.http_server import HttpServer, Response

pytestmark = pytest.mark.anyio

ALLOWED = ["127.0.0.1"]
ID_SCHEMA = {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}



async def install(app: SidecarClient, tmp_path: Path, *tools: dict[str, Any], config: dict[str, Any] | None = None
                  ) -> None:
    folder = tmp_path / "hostile"
    folder.mkdir(exist_ok=True)
    manifest: dict[str, Any] = {"manifest_version": "1", "id": "hostile", "name": "Hostile", "tools": list(tools)}
    if config:
        manifest["config_schema"] = {k: {"description": k} for k in config}
    (folder / "toolset.yaml").write_text(yaml.safe_dump(manifest))
    await app.request("toolsets/import", {"path": str(folder), "replace": True})
    if config:
        await app.request("config/set", {"toolsetId": "hostile", "values": config})


def tool(id_: str, http: dict[str, Any], schema: dict[str, Any] | None = ID_SCHEMA) -> dict[str, Any]:
    out: dict[str, Any] = {"id": id_, "http": {"allowedHosts": list(ALLOWED), **http}}  # (no YAML alias)
    if schema is not None:
        out["input_schema"] = schema
    return out


async def call(app: SidecarClient, tool_id: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
    return (await app.request("tools/call", {"toolId": f"hostile:{tool_id}", "args": args or {}}))["toolCall"]


# -- arguments ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "target"), [
    ("../admin", "/items/..%2Fadmin/info"),
    ("..", "/items/%2E%2E/info"),
    (".", "/items/%2E/info"),
    ("a/b", "/items/a%2Fb/info"),
    ("a%2Fb", "/items/a%252Fb/info"),
    ("x?admin=1&y=2", "/items/x%3Fadmin%3D1%26y%3D2/info"),
    ("x#frag", "/items/x%23frag/info"),
    ("@evil.example", "/items/%40evil.example/info"),
    ("a\r\nX-Injected: 1", "/items/a%0D%0AX-Injected%3A%201/info"),
])
async def test_an_argument_stays_inside_its_path_segment(app, http_server: HttpServer, tmp_path: Path,
                                                         value: str, target: str):
    await install(app, tmp_path, tool("get", {"urlTemplate": f"{http_server.url}/items/${{id}}/info",
                                              "maxRetries": 0}))
    await call(app, "get", {"id": value})
    seen = http_server.requests[-1]
    assert seen.target == target  # same host (it reached this server), one segment, no query
    assert seen.header("X-Injected") is None


@pytest.mark.parametrize("value", ["a&limit=1000", "x#y", "b=c", "%26", "q\r\nX-Injected: 1"])
async def test_an_argument_stays_inside_its_query_value(app, http_server: HttpServer, tmp_path: Path, value: str):
    await install(app, tmp_path, tool("search", {"urlTemplate": f"{http_server.url}/search?limit=10",
                                                 "query": {"q": "${id}"}}))
    await call(app, "search", {"id": value})
    seen = http_server.requests[-1]
    assert seen.path == "/search" and seen.query == [("limit", "10"), ("q", value)]
    assert seen.header("X-Injected") is None


async def test_a_line_break_never_reaches_a_header(app, http_server: HttpServer, tmp_path: Path):
    await install(app, tmp_path, tool("traced", {"urlTemplate": f"{http_server.url}/t",
                                                 "headers": {"X-Trace": "trace-${id}"}}))
    for value in ("a\r\nX-Admin: 1", "a\nX-Admin: 1", "a\rb", "a\x00b"):
        record = await call(app, "traced", {"id": value})
        assert record["status"] == "error" and record["errorKind"] == "arguments"
        assert "${id} holds a line break" in record["error"]
    assert http_server.requests == []  # nothing was sent
    assert (await call(app, "traced", {"id": "ok: fine"}))["status"] == "error"  # 404, but sent
    assert http_server.requests[-1].header("X-Trace") == "trace-ok: fine"


async def test_the_host_comes_only_from_config_and_must_be_allowed(app, http_server: HttpServer, tmp_path: Path):
    get = tool("get", {"urlTemplate": "http://${api_host}/items/${id}"})
    await install(app, tmp_path, get, config={"api_host": f"{http_server.netloc}/evil?x="})
    record = await call(app, "get", {"id": "1"})
    assert record["errorKind"] == "arguments" and "not a plain host name" in record["error"]
    await app.request("config/set", {"toolsetId": "hostile", "values": {"api_host": "localhost.example:1"}})
    record = await call(app, "get", {"id": "1"})
    assert record["errorKind"] == "refused"
    assert "host 'localhost.example' is not in allowedHosts (127.0.0.1); it was not looked up" in record["error"]
    assert http_server.requests == []


async def test_a_body_over_max_request_bytes_is_never_sent(app, http_server: HttpServer, tmp_path: Path):
    await install(app, tmp_path, tool("post", {"method": "POST", "urlTemplate": f"{http_server.url}/p",
                                               "body": {"text": "${id}"}, "maxRequestBytes": 1000}))
    record = await call(app, "post", {"id": "x" * 2000})
    assert record["errorKind"] == "too_large" and "maxRequestBytes is 1000" in record["error"]
    assert http_server.requests == []


# -- servers -----------------------------------------------------------------------------------------


async def test_a_1_gb_response_is_refused_at_the_cap(app, http_server: HttpServer, tmp_path: Path):
    http_server.route("GET", "/big", Response(size=1 << 30))
    http_server.route("GET", "/big-chunked", Response(chunks=[b"x" * 65536] * (1 << 14)))  # 1 GB, no length
    await install(app, tmp_path,
                  tool("big", {"urlTemplate": f"{http_server.url}/big", "maxResponseBytes": 1 << 20}, None),
                  tool("chunked", {"urlTemplate": f"{http_server.url}/big-chunked", "maxResponseBytes": 1 << 20},
                       None))
    record = await call(app, "big")
    assert record["errorKind"] == "too_large"
    assert "the response is 1073741824 bytes; the tool's maxResponseBytes is 1048576" in record["error"]
    record = await call(app, "chunked")
    assert record["errorKind"] == "too_large" and "went past the tool's maxResponseBytes" in record["error"]


async def test_a_never_ending_response_stops_at_the_cap(app, http_server: HttpServer, tmp_path: Path):
    http_server.route("GET", "/forever", Response(forever=True))
    await install(app, tmp_path, tool("forever", {"urlTemplate": f"{http_server.url}/forever",
                                                  "maxResponseBytes": 1 << 20}, None))
    record = await call(app, "forever")
    assert record["errorKind"] == "too_large"
    assert http_server.aborted.wait(5)  # the connection was dropped, not drained


async def test_a_slow_loris_server_is_cut_at_the_timeout(app, http_server: HttpServer, tmp_path: Path):
    http_server.route("GET", "/trickle", Response(body=b"{}" * 1000, byte_delay=0.05))  # a byte at a time
    http_server.route("GET", "/drip", Response(forever=True, body=b"x", chunk_delay=0.05))  # never ends
    await install(app, tmp_path, tool("trickle", {"urlTemplate": f"{http_server.url}/trickle", "timeout": 0.5}, None),
                  tool("drip", {"urlTemplate": f"{http_server.url}/drip", "timeout": 0.5}, None))
    for name in ("trickle", "drip"):
        record = await call(app, name)
        assert record["errorKind"] == "timeout"
        assert "got no complete answer within 0.5 s" in record["error"]


async def test_a_server_closing_mid_body_is_retried_then_reported(app, http_server: HttpServer, tmp_path: Path):
    http_server.route("GET", "/cut", Response(body=b"x" * 1000, close_after=10))
    http_server.route("POST", "/cut", Response(body=b"x" * 1000, close_after=10))
    await install(app, tmp_path, tool("cut", {"urlTemplate": f"{http_server.url}/cut", "maxRetries": 2}, None),
                  tool("post", {"method": "POST", "urlTemplate": f"{http_server.url}/cut", "maxRetries": 2,
                                "body": {}}, None))
    record = await call(app, "cut")
    assert record["errorKind"] == "upstream"
    assert "closed the connection before the response was complete (after 3 tries)" in record["error"]
    assert len(http_server.requests_to("/cut")) == 3
    record = await call(app, "post")  # the server may have acted on it: a POST is not sent again
    assert record["errorKind"] == "upstream" and len(http_server.requests_to("/cut")) == 4


async def test_429_with_retry_after_is_waited_for(app, http_server: HttpServer, tmp_path: Path):
    http_server.route("GET", "/busy", Response(429, headers={"Retry-After": "1"}), Response(json={"ok": True}))
    http_server.route("GET", "/later", Response(429, headers={"Retry-After": "3600"}))
    await install(app, tmp_path, tool("busy", {"urlTemplate": f"{http_server.url}/busy"}, None),
                  tool("later", {"urlTemplate": f"{http_server.url}/later", "maxRetryWait": 10}, None))
    started = anyio.current_time()
    record = await call(app, "busy")
    assert record["status"] == "success" and record["result"] == {"ok": True}
    assert anyio.current_time() - started >= 1.0  # behaviour, not speed: it did wait what it was told
    assert len(http_server.requests_to("/busy")) == 2
    record = await call(app, "later")
    assert record["errorKind"] == "rate_limited"
    assert "asked to retry after 3600 s, longer than the tool's maxRetryWait (10 s)" in record["error"]
    assert len(http_server.requests_to("/later")) == 1


async def test_5xx_is_retried_with_back_off_and_gives_up_after_max_retries(app, http_server: HttpServer,
                                                                           tmp_path: Path):
    http_server.route("GET", "/flaky", Response(503), Response(502), Response(json=[1]))
    http_server.route("GET", "/down", Response(500, json={"error": "db down"}))
    http_server.route("POST", "/down", Response(500))
    await install(app, tmp_path, tool("flaky", {"urlTemplate": f"{http_server.url}/flaky"}, None),
                  tool("down", {"urlTemplate": f"{http_server.url}/down", "maxRetries": 1}, None),
                  tool("post", {"method": "POST", "urlTemplate": f"{http_server.url}/down", "body": {}}, None))
    assert (await call(app, "flaky"))["result"] == [1]
    assert len(http_server.requests_to("/flaky")) == 3
    record = await call(app, "down")
    assert record["errorKind"] == "upstream" and record["result"] == {"status": 500, "body": {"error": "db down"}}
    assert len(http_server.requests_to("/down")) == 2
    await call(app, "post")  # a 500 to a POST: not retried
    assert len([r for r in http_server.requests_to("/down") if r.method == "POST"]) == 1


async def test_a_dead_port_is_a_connection_error(app, http_server: HttpServer, tmp_path: Path):
    dead = HttpServer()
    url = dead.url
    dead.close()  # nothing listens there now
    await install(app, tmp_path, tool("dead", {"urlTemplate": f"{url}/x", "maxRetries": 1}, None))
    record = await call(app, "dead")
    assert record["errorKind"] == "upstream" and "could not connect (after 2 tries)" in record["error"]


async def test_a_redirect_is_not_followed_unless_allowed(app, http_server: HttpServer, tmp_path: Path):
    http_server.route("GET", "/old", Response(302, headers={"Location": "http://169.254.169.254/latest"}))
    await install(app, tmp_path, tool("old", {"urlTemplate": f"{http_server.url}/old"}, None))
    record = await call(app, "old")
    assert record["errorKind"] == "upstream" and "a redirect to http://169.254.169.254/latest" in record["error"]
    assert len(http_server.requests) == 1


async def test_max_calls_per_minute_fails_the_call_over_the_rate(app, http_server: HttpServer, tmp_path: Path):
    http_server.route("GET", "/r", Response(json=1))
    await install(app, tmp_path, tool("rated", {"urlTemplate": f"{http_server.url}/r", "maxCallsPerMinute": 2},
                                      None))
    assert [(await call(app, "rated"))["status"] for _ in range(2)] == ["success", "success"]
    record = await call(app, "rated")
    assert record["errorKind"] == "rate_limited"
    assert "limited to 2 calls a minute (maxCallsPerMinute); the next call can go in" in record["error"]
    assert len(http_server.requests) == 2


async def test_cancelling_the_call_aborts_the_request(app, http_server: HttpServer, tmp_path: Path):
    http_server.route("GET", "/slow", Response(forever=True, body=b"x", chunk_delay=0.05))
    await install(app, tmp_path, tool("slow", {"urlTemplate": f"{http_server.url}/slow", "timeout": 60}, None))
    request_id = app.new_id()
    answer = app.expect(request_id)
    await app.send({"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                    "params": {"toolId": "hostile:slow", "args": {}}})
    await anyio.to_thread.run_sync(http_server.wait_for, 1)
    await app.notify("$/cancelRequest", {"id": request_id})
    got = await answer(10)
    assert got["error"]["code"] == -32800
    assert await anyio.to_thread.run_sync(http_server.aborted.wait, 5)  # the server saw the client leave


async def test_a_result_holds_no_secret_even_in_its_json_escaping(app, http_server: HttpServer, tmp_path: Path):
    secret = 'sk-"quoted"\\slash-123'
    http_server.route("GET", "/echo", handler=lambda r: Response(json={"got": r.header("authorization")}))
    await install(app, tmp_path, tool("echo", {"urlTemplate": f"{http_server.url}/echo",
                                               "headers": {"Authorization": "Bearer ${ECHO_TOKEN}"}}, None))
    await app.request("secrets/set", {"name": "ECHO_TOKEN", "value": secret})
    record = await call(app, "echo")
    assert record["result"] == {"got": "Bearer ****"} and secret not in json.dumps(record)


async def test_a_followed_redirect_is_checked_at_every_hop(app, http_server: HttpServer, tmp_path: Path):
    http_server.route("GET", "/hop", Response(302, headers={"Location": f"http://localhost:{http_server.port}/end"}))
    http_server.route("GET", "/near", Response(302, headers={"Location": "/end"}))
    http_server.route("GET", "/end", Response(json={"arrived": True}))
    await install(app, tmp_path, tool("hop", {"urlTemplate": f"{http_server.url}/hop", "followRedirects": True}, None),
                  tool("near", {"urlTemplate": f"{http_server.url}/near", "followRedirects": True}, None))
    record = await call(app, "hop")  # localhost is not in allowedHosts (only 127.0.0.1 is)
    assert record["errorKind"] == "refused"
    assert "host 'localhost' is not in allowedHosts (127.0.0.1)" in record["error"]  # the hop, not the first URL
    assert http_server.requests_to("/end") == []
    assert (await call(app, "near"))["result"] == {"arrived": True}


async def test_retry_after_as_a_date(app, http_server: HttpServer, tmp_path: Path):
    import email.utils
    import time

    def busy(_request: Any) -> Response:
        if len(http_server.requests_to("/dated")) == 1:
            return Response(503, headers={"Retry-After": email.utils.formatdate(time.time() + 1, usegmt=True)})
        return Response(json="ok")

    http_server.route("GET", "/dated", handler=busy)
    await install(app, tmp_path, tool("dated", {"urlTemplate": f"{http_server.url}/dated"}, None))
    record = await call(app, "dated")
    assert record["result"] == "ok" and len(http_server.requests_to("/dated")) == 2


async def test_a_name_that_resolves_to_loopback_is_refused_unless_its_address_is_listed(
        app, http_server: HttpServer, tmp_path: Path):
    http_server.route("GET", "/x", Response(json=1))
    by_name = tool("by_name", {"urlTemplate": f"http://localhost:{http_server.port}/x"}, None)
    by_name["http"]["allowedHosts"] = ["localhost"]
    await install(app, tmp_path, by_name)
    record = await call(app, "by_name")
    assert record["errorKind"] == "refused"
    assert "localhost resolved to" in record["error"] and "loopback" in record["error"]
    assert http_server.requests == []  # never connected


async def test_auth_helpers_apply_and_a_401_refreshes_the_oauth2_token_once(app, http_server: HttpServer,
                                                                           tmp_path: Path):
    tokens = iter(["tok-old-1111", "tok-new-2222"])
    http_server.route("POST", "/token", handler=lambda r: Response(json={"access_token": next(tokens),
                                                                         "expires_in": 3600}))
    http_server.route("GET", "/me", handler=lambda r: Response(json={"auth": r.header("authorization")})
                      if r.header("authorization") == "Bearer tok-new-2222" else Response(401))
    http_server.route("GET", "/bearer", handler=lambda r: Response(json={"auth": r.header("authorization")}))
    await app.request("secrets/set", {"name": "CLIENT_SECRET", "value": "cs-secret-9999"})
    await app.request("secrets/set", {"name": "BEARER_TOKEN", "value": "bt-secret-8888"})
    oauth = tool("me", {"urlTemplate": f"{http_server.url}/me", "auth": {
        "type": "oauth2", "tokenUrl": f"{http_server.url}/token", "clientId": "app",
        "clientSecret": "${CLIENT_SECRET}"}}, None)
    bearer = tool("bearer", {"urlTemplate": f"{http_server.url}/bearer",
                             "auth": {"type": "bearer", "token": "${BEARER_TOKEN}"}}, None)
    await install(app, tmp_path, oauth, bearer)
    record = await call(app, "me")
    assert record["status"] == "success", record
    assert len(http_server.requests_to("/token")) == 2 and len(http_server.requests_to("/me")) == 2
    assert "tok-new-2222" not in json.dumps(record)  # the token sent is masked in the echoed result
    record = await call(app, "bearer")
    assert http_server.requests_to("/bearer")[-1].header("authorization") == "Bearer bt-secret-8888"
    assert record["result"] == {"auth": "Bearer ****"}

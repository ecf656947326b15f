"""The local HTTP test server itself does what the HTTP-tool tests script it to do."""

from __future__ import annotations

import socket
import time

import httpx2
import pytest

from tests.http_server import HttpServer, Response, echo


def test_routes_answer_in_order_and_the_last_repeats(http_server: HttpServer) -> None:
    http_server.route("GET", "/flaky", Response(429, headers={"Retry-After": "2"}), Response(json={"ok": True}))
    with httpx2.Client(base_url=http_server.url) as client:
        first = client.get("/flaky")
        assert first.status_code == 429 and first.headers["retry-after"] == "2"
        assert client.get("/flaky").json() == {"ok": True}
        assert client.get("/flaky").json() == {"ok": True}
        assert client.get("/nope").status_code == 404
    assert [r.path for r in http_server.requests] == ["/flaky"] * 3 + ["/nope"]


def test_the_recorder_keeps_the_raw_target_headers_and_body(http_server: HttpServer) -> None:
    http_server.route("POST", "/items/a%2Fb", handler=echo)
    with httpx2.Client() as client:
        got = client.post(f"{http_server.url}/items/a%2Fb?q=1&q=2", headers={"X-Key": "v"}, json={"a": 1}).json()
    assert got["target"] == "/items/a%2Fb?q=1&q=2"
    seen = http_server.requests[-1]
    assert seen.header("x-key") == "v" and seen.json() == {"a": 1} and seen.query == [("q", "1"), ("q", "2")]


def test_chunked_lazy_sized_and_redirect_bodies(http_server: HttpServer) -> None:
    http_server.route("GET", "/chunks", Response(chunks=[b"ab", b"cd"]))
    http_server.route("GET", "/big", Response(size=3 * 65536 + 5))
    http_server.route("GET", "/moved", Response(302, headers={"Location": "/chunks"}))
    with httpx2.Client(base_url=http_server.url, follow_redirects=True) as client:
        assert client.get("/chunks").content == b"abcd"
        assert len(client.get("/big").content) == 3 * 65536 + 5
        assert client.get("/moved").content == b"abcd"


def test_a_never_ending_body_stops_when_the_client_leaves(http_server: HttpServer) -> None:
    http_server.route("GET", "/forever", Response(forever=True))
    with httpx2.Client(base_url=http_server.url) as client, client.stream("GET", "/forever") as response:
        got = 0
        for block in response.iter_bytes():
            got += len(block)
            if got > 1_000_000:
                break
    assert http_server.aborted.wait(5)


def test_a_cut_body_and_a_trickle(http_server: HttpServer) -> None:
    http_server.route("GET", "/cut", Response(body=b"x" * 1000, close_after=10))
    http_server.route("GET", "/slow", Response(body=b"hi", byte_delay=0.2))
    with httpx2.Client(base_url=http_server.url) as client:
        with pytest.raises(httpx2.RemoteProtocolError):
            client.get("/cut")
        with pytest.raises(httpx2.ReadTimeout):
            client.get("/slow", timeout=httpx2.Timeout(0.1))


def test_delay_and_close() -> None:
    server = HttpServer().start()
    server.route("GET", "/late", Response(delay=0.2, body="ok"))
    started = time.monotonic()
    assert httpx2.get(server.url + "/late").text == "ok"
    assert time.monotonic() - started >= 0.2
    server.close()
    with pytest.raises(OSError), socket.create_connection((server.host, server.port), timeout=1):
        pass

"""Where a remote server's OAuth metadata may send the sidecar's own requests (metadata, registration,
token, revocation), and that those requests connect only to the addresses that were checked.

A DNS name is resolved by an injected resolver (real DNS of a made-up name would need the internet);
the servers, sockets and the httpx2 client are real.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import httpx2
import pytest
from mcp.client.auth import OAuthFlowError

from sidecar.mcp_host.oauth_guard import Destinations, check_endpoint
from tests.http_server import HttpServer, Response

pytestmark = pytest.mark.anyio


class Resolver:
    """Answers from a table; a list of answers for one name is served in turn, the last repeating."""

    def __init__(self, table: dict[str, list[list[str]]]) -> None:
        self.table = table
        self.asked: list[str] = []

    async def __call__(self, host: str, port: int) -> list[str]:
        self.asked.append(host)
        answers = self.table[host]
        return answers.pop(0) if len(answers) > 1 else answers[0]


@pytest.fixture
def connects(caplog: pytest.LogCaptureFixture) -> Callable[[], list[str]]:
    """Every connection the pinned transport opened, as 'host -> address' (from its debug log)."""
    caplog.set_level(logging.DEBUG, logger="sidecar.mcp_host.oauth")

    def seen() -> list[str]:
        return [f"{r.args[0]} -> {r.args[2]}" for r in caplog.records  # type: ignore[index] -- (host, port, address)
                if r.name == "sidecar.mcp_host.oauth" and r.msg.startswith("http: connecting")]
    return seen


async def test_a_public_server_cannot_steer_oauth_requests_to_this_machine_its_network_or_cloud_metadata() -> None:
    public = Destinations("https://93.184.215.14/mcp", resolver=Resolver({"auth.test": [["10.1.2.3"]]}))
    for host, words in (("169.254.169.254", "cloud metadata"), ("127.0.0.1", "loopback"), ("10.0.0.5", "private"),
                        ("::ffff:192.168.1.1", "private"), ("auth.test", "resolved to 10.1.2.3, a private")):
        with pytest.raises(OAuthFlowError, match=words):
            await public.addresses(host, 443)
    assert await public.addresses("93.184.215.14", 443) == ["93.184.215.14"]  # its own host
    assert await public.addresses("8.8.8.8", 443) == ["8.8.8.8"]  # another public one


async def test_a_server_on_this_machine_may_have_its_authorization_server_here_too() -> None:
    local = Destinations("http://127.0.0.1:9000/mcp")
    assert await local.addresses("127.0.0.1", 9001) == ["127.0.0.1"]
    assert await local.addresses("10.0.0.5", 80) == ["10.0.0.5"]


async def test_an_oauth_request_is_refused_before_it_connects_to_an_address_it_may_not_reach(connects) -> None:
    with HttpServer() as local:
        local.route("POST", "/token", Response(json={"access_token": "stolen", "token_type": "Bearer"}))
        dns = Resolver({"auth.test": [["127.0.0.1"]]})
        guard = Destinations("https://93.184.215.14/mcp", resolver=dns)
        async with httpx2.AsyncClient(transport=guard.transport(), timeout=5) as http:
            with pytest.raises(OAuthFlowError, match="auth.test was refused: it resolved to 127.0.0.1, a loopback"):
                await http.post(f"http://auth.test:{local.port}/token", data={"code": "x"})
        assert local.requests == [] and connects() == []


async def test_a_dns_answer_that_changes_after_the_check_does_not_move_the_connection(connects) -> None:
    # The rebinding attack: the name answers a public address when it is checked and this machine's
    # loopback when it is looked up again to connect, where a local service listens on the port.
    with HttpServer() as local:
        local.route("POST", "/token", Response(json={"access_token": "stolen", "token_type": "Bearer"}))
        dns = Resolver({"auth.test": [["93.184.215.15"], ["127.0.0.1"]]})
        guard = Destinations("https://93.184.215.14/mcp", resolver=dns)
        async with httpx2.AsyncClient(transport=guard.transport(), timeout=httpx2.Timeout(5, connect=1)) as http:
            with pytest.raises(httpx2.TransportError):  # nothing answers on that public address offline
                await http.post(f"http://auth.test:{local.port}/token", data={"code": "x"})
        assert local.requests == []
        assert dns.asked == ["auth.test"]  # looked up once: the connection went to what was checked
        assert connects() == ["auth.test -> 93.184.215.15"]


def test_codes_and_tokens_go_over_https_or_to_this_machine_only() -> None:
    check_endpoint("token", "https://auth.example.com/token")
    check_endpoint("token", "http://127.0.0.1:8000/token")
    with pytest.raises(OAuthFlowError, match="not HTTPS"):
        check_endpoint("authorization", "http://auth.example.com/authorize")

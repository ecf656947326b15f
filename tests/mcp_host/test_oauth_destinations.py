"""Where a remote server's OAuth metadata may send the sidecar's own requests (metadata, registration, token)."""

from __future__ import annotations

import pytest
from mcp.client.auth import OAuthFlowError

from sidecar.mcp_host.oauth_guard import Destinations, check_endpoint

pytestmark = pytest.mark.anyio


async def test_a_public_server_cannot_steer_oauth_requests_to_this_machine_its_network_or_cloud_metadata() -> None:
    public = Destinations("https://93.184.215.14/mcp")
    for url, words in (("http://169.254.169.254/latest/meta-data", "cloud metadata"),
                       ("http://127.0.0.1:8080/token", "loopback"), ("https://10.0.0.5/register", "private"),
                       ("https://[::ffff:192.168.1.1]/token", "private")):
        with pytest.raises(OAuthFlowError, match=words):
            await public.check(url)
    await public.check("https://93.184.215.14/.well-known/oauth-protected-resource/mcp")  # its own host
    await public.check("https://8.8.8.8/token")  # another public one


async def test_a_server_on_this_machine_may_have_its_authorization_server_here_too() -> None:
    local = Destinations("http://127.0.0.1:9000/mcp")
    await local.check("http://127.0.0.1:9001/token")
    await local.check("http://10.0.0.5/token")


def test_codes_and_tokens_go_over_https_or_to_this_machine_only() -> None:
    check_endpoint("token", "https://auth.example.com/token")
    check_endpoint("token", "http://127.0.0.1:8000/token")
    with pytest.raises(OAuthFlowError, match="not HTTPS"):
        check_endpoint("authorization", "http://auth.example.com/authorize")

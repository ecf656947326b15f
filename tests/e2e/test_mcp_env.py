"""The environment a stdio MCP server gets through the real sidecar: this machine's certificate, proxy
and package-manager settings and its envPassthrough names, never a provider key or the sidecar's own
settings; the names shown (mcpServers/list's envNames, debug/info's childEnvironment), never values.
And what mcpServers/add refuses: a passthrough of a secret, a command that is a shell line or a path
relative to nothing."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from sidecar.client import SidecarClient
from tests.e2e.test_mcp import FIXTURES, status

pytestmark = pytest.mark.anyio

BASIC = str(FIXTURES / "basic.py")
PROXY_PASSWORD = "pr0xy-Pa55word-e2e"
MACHINE = {
    "SSL_CERT_FILE": "/etc/ssl/certs/ca-certificates.crt", "SSL_CERT_DIR": "/etc/ssl/certs",
    "NODE_EXTRA_CA_CERTS": "/etc/ssl/certs/ca-certificates.crt",
    "HTTPS_PROXY": f"http://alice:{PROXY_PASSWORD}@127.0.0.1:9", "NO_PROXY": "127.0.0.1,localhost",
    "UV_INDEX_URL": "https://pypi.example/simple", "npm_config_registry": "https://npm.example/",
    "OPENAI_API_KEY": "sk-proj-e2eSidecarOwnKey123456", "SIDECAR_OAUTH_CLIENT_METADATA_URL": "https://app.example/c",
    "MY_TOOL_SETTING": "on", "UV_PUBLISH_TOKEN": "pypi-e2eTokenValue123",
}


async def env_of(sc: SidecarClient, key: str, name: str) -> str:
    done = (await sc.request("tools/call", {"toolId": f"mcp:{key}:env", "args": {"name": name}},
                             timeout=60))["toolCall"]
    assert done["status"] == "success", done
    return done["result"]["content"][0]["text"]


async def test_a_server_gets_the_machines_network_settings_and_its_passthrough_not_secrets(data_dir: Path):
    async with SidecarClient.spawn(data_dir, env=MACHINE) as sc:
        added = (await sc.request("mcpServers/add", {"id": "env", "command": sys.executable, "args": [BASIC],
                                                     "envPassthrough": ["MY_TOOL_SETTING"]}))["server"]
        assert added["envPassthrough"] == ["MY_TOOL_SETTING"]
        server = await status(sc, "env~env", "connected", "error")
        assert server["status"] == "connected", server["error"]
        for name in ("SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS", "HTTPS_PROXY", "NO_PROXY",
                     "UV_INDEX_URL", "npm_config_registry", "MY_TOOL_SETTING"):
            assert await env_of(sc, "env~env", name) == MACHINE[name], name
        for name in ("OPENAI_API_KEY", "SIDECAR_OAUTH_CLIENT_METADATA_URL", "UV_PUBLISH_TOKEN"):
            assert await env_of(sc, "env~env", name) == "<unset>", name

        listed = (await sc.request("mcpServers/list"))["servers"][0]
        assert {"SSL_CERT_FILE", "HTTPS_PROXY", "UV_INDEX_URL", "MY_TOOL_SETTING"} <= set(listed["envNames"])
        assert not {"OPENAI_API_KEY", "UV_PUBLISH_TOKEN", "PATH"} & set(listed["envNames"])
        info = (await sc.request("debug/info"))["childEnvironment"]
        assert "SSL_CERT_FILE" in info["tools"] and "HTTPS_PROXY" in info["tools"]
        assert "UV_INDEX_URL" not in info["tools"] and "UV_INDEX_URL" in info["mcpServers"]
        assert "OPENAI_API_KEY" not in info["mcpServers"]
        # Names only: no value of the machine's reaches an answer (the proxy's password least of all).
        shown = json.dumps([listed, info])
        assert not any(v in shown for v in (PROXY_PASSWORD, "/etc/ssl/certs", "pypi.example", "sk-proj"))

        # Dropping the name from envPassthrough takes the variable away (the server restarts).
        await sc.request("mcpServers/update", {"id": "env", "envPassthrough": []})
        await status(sc, "env~env", "connected")
        assert await env_of(sc, "env~env", "MY_TOOL_SETTING") == "<unset>"
    assert PROXY_PASSWORD not in sc.stderr_text()  # the debug log neither


@pytest.mark.parametrize(("given", "path", "says"), [
    ({"envPassthrough": ["OPENAI_API_KEY"]}, "params.envPassthrough[0]", "model provider's key"),
    ({"envPassthrough": ["HOME", "GITHUB_TOKEN"]}, "params.envPassthrough[1]", '"${GITHUB_TOKEN}"'),
    ({"envPassthrough": ["SIDECAR_DATA_DIR"]}, "params.envPassthrough[0]", "sidecar's own settings"),
    ({"envPassthrough": ["NOT-A-NAME"]}, "params.envPassthrough[0]", ""),
    ({"command": "npx -y @modelcontextprotocol/server-memory", "args": []}, "params.command",
     '{"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"]}'),
    ({"command": "uvx mcp-server-time", "args": ["--local-timezone", "UTC"]}, "params.command",
     '{"command": "uvx", "args": ["mcp-server-time", "--local-timezone", "UTC"]}'),
    ({"command": "bin/server"}, "params.command", "relative path"),
    ({"type": "sse", "command": None, "args": [], "url": "https://mcp.example/sse", "envPassthrough": ["X"]},
     "params.envPassthrough", "runs elsewhere"),
])
async def test_mcp_servers_add_refuses_what_cannot_work_saying_what_to_write(app: SidecarClient, given: dict,
                                                                             path: str, says: str):
    params = {"id": "s", "command": sys.executable, "args": [BASIC]} | given
    refused = await app.request_raw("mcpServers/add", params)
    assert refused["error"]["code"] == -32602, refused
    assert refused["error"]["data"]["path"] == path, refused
    assert says in refused["error"]["message"], refused
    assert (await app.request("mcpServers/list"))["servers"] == []
    # update checks the same way
    await app.request("mcpServers/add", {"id": "kept", "command": sys.executable, "args": [BASIC]})
    again = await app.request_raw("mcpServers/update", {"id": "kept"} | given)
    assert again["error"]["code"] == -32602 and says in again["error"]["message"], again


async def test_a_relative_command_with_its_cwd_is_fine_and_an_absolute_path_with_spaces_too(app: SidecarClient,
                                                                                           tmp_path: Path):
    spaced = tmp_path / "My Server" / "run server"
    spaced.parent.mkdir()
    spaced.write_text(f"#!/bin/sh\nexec {sys.executable} {BASIC}\n")
    spaced.chmod(0o755)
    ok = (await app.request("mcpServers/add", {"id": "spaced", "command": str(spaced)}))["server"]
    assert ok["command"] == [str(spaced)]
    relative = (await app.request("mcpServers/add", {"id": "rel", "command": "./run server",
                                                     "cwd": str(spaced.parent)}))["server"]
    assert relative["cwd"] == str(spaced.parent)
    assert (await status(app, "rel~rel", "connected", "error"))["status"] == "connected"

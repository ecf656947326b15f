"""HTTP tools with each auth type, installed from a toolset.yaml and called through the app (and
once through the real process, whose debug log is grepped), against the local token endpoint and
resource (auth_server.py on tests/http_server.py)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sidecar.client import SidecarClient
from tests.tools.http.auth_server import AuthServer, auth_server

pytestmark = pytest.mark.anyio

TOKEN = "tok-app-Vb4Nq8Lz2X"
PASSWORD = "pw-app-Hs6Kd1Tw9R"
KEY = "key-app-Jp3Mc7Yf5E"
HMAC_KEY = "hk-app-Qr2Wx8Gv4U"

MANIFEST = """manifest_version: "1"
id: authed
name: Authed API
version: "1.0.0"
tools:
  - id: bearer
    description: bearer
    http:
      urlTemplate: "{url}/echo"
      allowedHosts: ["127.0.0.1"]
      auth: {{type: bearer, token: "${{AUTHED_TOKEN}}"}}
  - id: basic
    description: basic
    http:
      urlTemplate: "{url}/echo"
      allowedHosts: ["127.0.0.1"]
      auth: {{type: basic, username: ann, password: "${{AUTHED_PASSWORD}}"}}
  - id: api_key
    description: api key in the query
    http:
      urlTemplate: "{url}/echo"
      query: {{q: "${{q}}"}}
      allowedHosts: ["127.0.0.1"]
      auth: {{type: apiKey, in: query, name: api_key, value: "${{AUTHED_KEY}}"}}
    input_schema: {{type: object, properties: {{q: {{type: string}}}}, required: [q]}}
  - id: signed
    description: hmac
    http:
      method: POST
      urlTemplate: "{url}/echo"
      body: {{name: "${{name}}"}}
      allowedHosts: ["127.0.0.1"]
      auth: {{type: hmac, secret: "${{hmac_key}}"}}
    input_schema: {{type: object, properties: {{name: {{type: string}}}}, required: [name]}}
    config_schema:
      hmac_key: {{description: "signing key", secret: true, required: true}}
  - id: oauth
    description: oauth2
    http:
      urlTemplate: "{url}/protected"
      allowedHosts: ["127.0.0.1"]
      auth:
        type: oauth2
        tokenUrl: "{url}/token"
        clientId: client-1
        clientSecret: "${{AUTHED_CLIENT_SECRET}}"
        scope: items:read
"""


@pytest.fixture
def server() -> Iterator[AuthServer]:
    with auth_server() as s:
        yield s


def toolset(tmp_path: Path, server: AuthServer, manifest: str = MANIFEST) -> Path:
    folder = tmp_path / "authed"
    folder.mkdir(exist_ok=True)
    (folder / "toolset.yaml").write_text(manifest.format(url=server.url))
    return folder


async def install(app: SidecarClient, folder: Path, server: AuthServer) -> None:
    await app.request("toolsets/import", {"path": str(folder)})
    for name, value in {"AUTHED_TOKEN": TOKEN, "AUTHED_PASSWORD": PASSWORD, "AUTHED_KEY": KEY,
                        "AUTHED_CLIENT_SECRET": server.client_secret}.items():
        await app.request("secrets/set", {"name": name, "value": value})
    await app.request("config/set", {"toolsetId": "authed", "toolId": "signed", "values": {"hmac_key": HMAC_KEY}})


async def call(app: SidecarClient, tool: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
    return (await app.request("tools/call", {"toolId": f"authed:{tool}", "args": args or {}}))["toolCall"]



async def test_each_auth_type_reaches_the_server_and_no_secret_reaches_the_record(
        app: SidecarClient, server: AuthServer, tmp_path: Path) -> None:
    await install(app, toolset(tmp_path, server), server)
    records = [await call(app, "bearer"), await call(app, "basic"), await call(app, "api_key", {"q": "a b"}),
               await call(app, "signed", {"name": "café"}), await call(app, "oauth")]
    assert [r["status"] for r in records] == ["success"] * 5, records
    bearer, basic, api_key, signed, token, protected = server.received
    assert bearer.header("authorization") == f"Bearer {TOKEN}"
    assert basic.header("authorization") == "Basic " + base64.b64encode(f"ann:{PASSWORD}".encode()).decode()
    assert api_key.query == [("q", "a b"), ("api_key", KEY)]
    stamp = signed.header("x-timestamp") or ""
    message = b"\n".join([b"POST", b"/echo", b"", stamp.encode(), signed.body])
    assert signed.header("x-signature") == hmac.new(HMAC_KEY.encode(), message, hashlib.sha256).hexdigest()
    assert json.loads(signed.body) == {"name": "café"}
    assert token.path == "/token" and protected.header("authorization") == "Bearer at-1-Hq7Xv2Lr9K"
    assert records[4]["result"] == {"ok": True, "token": "****"}  # a token the server echoes is masked
    listed = json.dumps(records)
    for value in (TOKEN, PASSWORD, KEY, HMAC_KEY, server.client_secret, "at-1-Hq7Xv2Lr9K"):
        assert value not in listed


async def test_a_401_refreshes_once_and_a_second_fails_the_call_clearly(
        app: SidecarClient, server: AuthServer, tmp_path: Path) -> None:
    await install(app, toolset(tmp_path, server), server)
    assert (await call(app, "oauth"))["status"] == "success"
    server.revoke()
    record = await call(app, "oauth")
    assert record["status"] == "success" and record["result"]["ok"] is True
    assert len(server.token_requests) == 2
    server.always_401 = True
    record = await call(app, "oauth")
    assert record["status"] == "error" and record["errorKind"] == "upstream"
    assert "401" in record["error"] and "freshly refreshed OAuth2 token" in record["error"]
    assert len(server.token_requests) == 3  # one refresh, no loop
    assert server.client_secret not in json.dumps(record)


async def test_a_literal_secret_in_the_manifest_is_refused_at_its_field(
        app: SidecarClient, server: AuthServer, tmp_path: Path) -> None:
    folder = toolset(tmp_path, server, MANIFEST.replace('"${{AUTHED_TOKEN}}"', '"tok-Literal9Zx"'))
    got = await app.request_raw("toolsets/import", {"path": str(folder)})
    error = got["error"]
    assert error["data"]["path"].endswith("tools[0].http.auth.token"), error
    assert "${NAME}" in error["message"] and "secrets/set" in error["message"]
    assert "tok-Literal9Zx" not in json.dumps(got)


async def test_a_token_endpoint_outside_allowed_hosts_is_refused(
        app: SidecarClient, server: AuthServer, tmp_path: Path) -> None:
    manifest = MANIFEST.replace('tokenUrl: "{url}/token"', 'tokenUrl: "http://localhost:{port}/token"')
    folder = tmp_path / "authed"
    folder.mkdir()
    (folder / "toolset.yaml").write_text(manifest.format(url=server.url, port=server.http.port))
    await install(app, folder, server)
    record = await call(app, "oauth")
    assert record["status"] == "error" and record["errorKind"] == "refused"
    assert "host 'localhost' is not in allowedHosts" in record["error"]
    assert server.token_requests == []


async def test_in_the_real_process_the_token_outlives_a_restart_and_no_secret_is_logged(
        server: AuthServer, tmp_path: Path, data_dir: Path) -> None:
    folder = toolset(tmp_path, server)
    logs = []
    async with SidecarClient.spawn(data_dir, args=("--log-level", "debug", "--secrets-backend", "file")) as sc:
        await install(sc, folder, server)
        for tool, args in [("bearer", {}), ("basic", {}), ("api_key", {"q": "x"}), ("signed", {"name": "n"}),
                           ("oauth", {})]:
            assert (await call(sc, tool, args))["status"] == "success"
        logs.append(sc.stderr_text())
    async with SidecarClient.spawn(data_dir, args=("--log-level", "debug", "--secrets-backend", "file")) as sc:
        assert (await call(sc, "oauth"))["status"] == "success"
        assert len(server.token_requests) == 1  # the cached token, read back from the store
        logs.append(sc.stderr_text())
    log = "\n".join(logs)
    assert "OAuth2 token of authed:oauth renewed" in log and "api_key=" in log  # the log saw these calls
    for value in (TOKEN, PASSWORD, KEY, HMAC_KEY, server.client_secret, "at-1-Hq7Xv2Lr9K"):
        assert value not in log, value

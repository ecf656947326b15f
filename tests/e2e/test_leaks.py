"""Every place a secret leaked before issue 12, tried as an attacker would, in one run of the real
process: each case plants its own distinct value, and every surface (responses, notifications, the
exported ZIP, error messages, the debug log on stderr) is grepped for every value.

The cases (issue 12, "Where secrets leak today"): tokens in an MCP server's args (``--token X``,
``--api-key X``, ``--header Authorization: Bearer X``, ``-k X``, ``--token=X``); tokens in a URL's
path, query and userinfo, of an MCP server and of a provider's ``baseUrl``; env values of an MCP
server that are not ``${VAR}`` (a secret name, a credential shape) and one that came from a
``${VAR}``; a server whose stderr relays all of them (an env dump and argparse's usage error); a 401
with a ``WWW-Authenticate`` challenge; a key and a header pasted with a trailing newline (httpx's
``Illegal header value b'...\\n'``); a provider error body quoting the key and the URL.

Masking is by meaning, so the test also checks that what is no secret stays readable.
"""

from __future__ import annotations

import json
import shutil
import sys
import threading
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import pytest

from sidecar.client import SidecarClient
from tests.providers.server import Reply, StreamServer, events
from tests.timing import scaled

pytestmark = pytest.mark.anyio

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
LEAKY = str(FIXTURES / "mcp" / "leaky.py")

# One distinct value per case: a hit names the case that leaked.
S = {
    "arg --token": "argtok-A1b2C3",
    "arg --api-key": "argkey-D4e5F6",
    "arg --header Authorization": "hdrarg-G7h8I9",
    "arg -k": "kflag-J1k2L3",
    "arg --token=": "eqtok-M4n5O6",
    "arg split header": "splithdr-T3u4V5",
    "env literal, secret name": "envlit-P7q8R9",
    "env literal, credential shape": "sk-envshape-V4w5X6y7",
    "env from ${VAR}": "envref-S1t2U3",
    "mcp url path": "Qx7Lm2Vb9Kt4Rz8Np3Ws",
    "mcp url ?token=": "urltok-Y8z9A1",
    "mcp url ?sig=": "urlsig-B2c3D4",
    "mcp url ?code=": "urlcode-E5f6G7",
    "mcp url password": "urlpw-H8i9J1",
    "mcp header": "mcphdr-K2l3M4",
    "WWW-Authenticate": "wwwtok-Ab12Cd34",
    "provider url path": "Zr5Tb8Yc2Hm6Jq9Lw4Ks",
    "provider url ?token=": "provq-N5o6P7",
    "provider key with newline": "sk-provkey-Q8r9S1t2U3v4",
    "provider header with newline": "provhdr-W5x6Y7",
    "bundle arg": "bundlearg-X1y2Z3",
    "bundle env": "bundleenv-C4d5E6",
    "bundle header": "bundlehdr-F7g8H9",
    "bundle url": "bundleurl-I1j2K3",
    "app config arg": "appcfg-L4m5N6",
}


@contextmanager
def refusing_server() -> Iterator[int]:
    """An HTTP endpoint that refuses everything with a 401 and a challenge naming a token URL."""
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _refuse(self) -> None:
            port = self.server.server_address[1]
            self.send_response(401)
            self.send_header("WWW-Authenticate", f'Bearer realm="mcp", error="invalid_token", resource_metadata='
                             f'"http://127.0.0.1:{port}/.well-known/oauth?token={S["WWW-Authenticate"]}"')
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = do_POST = do_DELETE = _refuse

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield httpd.server_address[1]
    finally:
        httpd.shutdown()
        httpd.server_close()


async def settled(sc: SidecarClient, key: str, seen: list[Any]) -> dict[str, Any]:
    """The server's view once it has failed (every list on the way is a response to grep too)."""
    with anyio.move_on_after(scaled(30)):
        while True:
            listed = await sc.request("mcpServers/list")
            seen.append(listed)
            server = next(s for s in listed["servers"] if s["id"] == key)
            if server["status"] == "error":
                return server
            await anyio.sleep(0.1)
    pytest.fail(f"{key} never failed: {server}")


def bundle(tmp_path: Path) -> Path:
    folder = tmp_path / "bundle"
    shutil.copytree(FIXTURES / "toolsets" / "app-builder", folder)
    with open(folder / "toolset.yaml", "a") as f:
        f.write(f'''
mcp_servers:
  - id: search
    command: npx
    args: ["-y", "search-server", "--api-key", "{S["bundle arg"]}", "--region=eu"]
    env:
      SEARCH_API_KEY: "{S["bundle env"]}"
      LOG_LEVEL: debug
      MEMORY_FILE_PATH: /tmp/memory.json
  - id: remote
    type: streamable-http
    url: "https://example.com/mcp?access_token={S["bundle url"]}&mode=fast"
    headers:
      Authorization: "Bearer {S["bundle header"]}"
      X-Team: core
''')
    return folder


async def test_no_secret_reaches_a_response_a_notification_an_export_an_error_or_the_log(
        tmp_path: Path, data_dir: Path) -> None:
    seen: list[Any] = []  # every response
    exported: list[str] = []
    models = StreamServer().start()
    try:
        with refusing_server() as port:
            async with SidecarClient.spawn(data_dir, args=("--log-level", "debug"),
                                           env={"LEAK_TOKEN": S["env from ${VAR}"]}) as sc:
                await mcp_cases(sc, port, seen, exported, tmp_path)
                errors = await provider_cases(sc, models, seen)
                await sc.request("shutdown")
    finally:
        models.stop()
    log = sc.stderr_text()

    surfaces = {"a response": json.dumps(seen), "a notification": json.dumps(sc.notifications),
                "an export": "\n".join(exported), "the log": log}
    leaks = [f"{case} ({value}) in {where}" for case, value in S.items()
             for where, text in surfaces.items() if value in text]
    assert not leaks, "\n".join(leaks)

    # The cases ran: the turns failed as planted, the server printed what it got, the log has the
    # traffic, the key went out stripped.
    responses = surfaces["a response"]
    assert len(errors) == 2, errors
    assert "HTTP 404" in errors[0] and "HTTP 500" in errors[1]
    # The header went to the secret store, which strips a pasted newline: it goes out whole.
    assert models.requests[-1].headers["x-custom-auth"] == S["provider header with newline"]
    assert "unrecognized arguments: --token ****" in responses and "API_TOKEN=****" in responses
    assert "HTTP Request" in log and "leaky" in log
    assert models.requests[0].headers["authorization"] == f"Bearer {S['provider key with newline']}"
    # ... and what is no secret stays readable.
    assert '"LOG_LEVEL": "debug"' in responses and '"X-Team": "core"' in responses
    assert "MEMORY_FILE_PATH" in responses and "/tmp/memory.json" in responses
    assert "mode=fast" in responses and "--region=eu" in responses
    assert "LOG_LEVEL: debug" in exported[0] and "X-Team: core" in exported[0]


async def mcp_cases(sc: SidecarClient, port: int, seen: list[Any], exported: list[str], tmp_path: Path) -> None:
    stdio = {"id": "leaky", "command": sys.executable, "args": [
        LEAKY, "--region=eu", "--token", S["arg --token"], "--api-key", S["arg --api-key"],
        "--header", f"Authorization: Bearer {S['arg --header Authorization']}", "-k", S["arg -k"],
        f"--token={S['arg --token=']}", "-H", "X-Auth-Token:", S["arg split header"]],
        "env": {"API_TOKEN": S["env literal, secret name"], "HELPER": S["env literal, credential shape"],
                "MY_VAR": "${LEAK_TOKEN}", "LOG_LEVEL": "debug"},
        "connectTimeout": 10}
    seen.append(await sc.request("mcpServers/add", stdio))
    failed = await settled(sc, "leaky~leaky", seen)
    assert "error" in failed and "Last lines of its stderr" in failed["error"]
    seen.append(await sc.request("mcpServers/reconnect", {"id": "leaky"}))
    await settled(sc, "leaky~leaky", seen)

    remote = {"id": "remote", "type": "streamable-http", "connectTimeout": 10,
              "url": f"http://user:{S['mcp url password']}@127.0.0.1:{port}/v1/{S['mcp url path']}/mcp"
                     f"?token={S['mcp url ?token=']}&sig={S['mcp url ?sig=']}&code={S['mcp url ?code=']}&mode=fast",
              "headers": {"Authorization": f"Bearer {S['mcp header']}", "X-Team": "core"}}
    seen.append(await sc.request("mcpServers/add", remote))
    await settled(sc, "remote~remote", seen)
    seen.append(await sc.request("mcpServers/reconnect", {"id": "remote"}))
    await settled(sc, "remote~remote", seen)

    for toolset in ("leaky", "remote"):
        seen.append(await sc.request("toolsets/get", {"id": toolset}))
        out = tmp_path / f"{toolset}.zip"
        seen.append(await sc.request("toolsets/export", {"id": toolset, "path": str(out)}))
        with zipfile.ZipFile(out) as z:
            exported.append("\n".join(z.read(n).decode(errors="replace") for n in z.namelist()))

    folder = bundle(tmp_path)
    seen.append(await sc.request("toolsets/inspect", {"path": str(folder)}))
    seen.append(await sc.request("toolsets/import", {"path": str(folder)}))
    seen.append(await sc.request("toolsets/get", {"id": "app-builder"}))
    out = tmp_path / "app-builder.zip"
    seen.append(await sc.request("toolsets/export", {"id": "app-builder", "path": str(out)}))
    with zipfile.ZipFile(out) as z:
        exported.insert(0, z.read("toolset.yaml").decode())
    seen.append(await sc.request("toolsets/inspect", {"path": str(out)}))

    config = tmp_path / "claude_desktop_config.json"
    config.write_text(json.dumps({"mcpServers": {"gh": {
        "command": "npx", "args": ["-y", "gh-server", "--token", S["app config arg"]],
        "env": {"GITHUB_TOKEN": S["app config arg"]}}}}))
    seen.append(await sc.request("mcpServers/importPreview", {"path": str(config)}))


async def provider_cases(sc: SidecarClient, models: StreamServer, seen: list[Any]) -> list[str]:
    """The chat/event error messages of the three turns (the second succeeds)."""
    base = f"{models.url}/v1/{S['provider url path']}?token={S['provider url ?token=']}"
    seen.append(await sc.request("providers/set", {
        "id": "leaky-openai", "kind": "openai", "baseUrl": base, "defaultModel": "gpt-4.1-mini",
        "apiKey": S["provider key with newline"] + "\n"}))
    seen.append(await sc.request("providers/set", {
        "id": "bad-header", "kind": "openai", "baseUrl": models.url + "/v1", "defaultModel": "gpt-4.1-mini",
        "apiKey": "sk-harmless-but-long-enough", "config": {"maxRetries": 0, "headers": {
            "X-Custom-Auth": S["provider header with newline"] + "\n"}}}))
    seen.append(await sc.request("providers/list"))

    # The server quotes what it was sent, as some proxies do; then a working turn with the stripped key.
    models.queue(Reply(404, body={"error": {"type": "not_found", "message":
        f"no route {base}/chat/completions for Authorization: Bearer {S['provider key with newline']}"}}),
                 Reply(events=events("openai_text.sse")))
    chat = (await sc.request("chats/create", {"title": "t"}))["chat"]["id"]
    for provider in ("leaky-openai", "leaky-openai", "bad-header"):
        seen.append(await sc.request_raw("chat/send", {"chatId": chat, "content": "hi", "provider": provider}))
    seen.append(await sc.request("chats/get", {"id": chat}))
    return [n["params"]["event"]["message"] for n in sc.notifications
            if n["method"] == "chat/event" and n["params"]["event"]["kind"] == "error"]

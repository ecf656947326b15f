"""The MCP conformance suite's client, played by the sidecar as a UI drives it.

``npx @modelcontextprotocol/conformance client --command "python scripts/conformance_client.py"``
runs this once per scenario with the scenario's server URL as the last argument, the scenario's
name in ``MCP_CONFORMANCE_SCENARIO`` and, for some, credentials in ``MCP_CONFORMANCE_CONTEXT``.

It starts the real sidecar (``python -m sidecar``) and does what a user does in the app:
``mcpServers/add`` (with the pre-registered client or the client credentials the scenario hands
out, as a user would enter them), ``mcpServers/login`` when the server asks for a sign-in, and a
tool call. The browser is played headlessly: ``ui/openUrl`` fetches the authorization page without
following its redirect, then delivers the redirect to the sidecar's loopback listener. A tool call
that fails for want of a sign-in (a scope step-up) signs in again, at most ``MAX_SIGN_INS`` times,
as a UI that shows a "sign in" button would let a user do.

Exits 0 when a tool call succeeded, 1 otherwise (the suite allows that where the client must refuse).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio
import httpx2

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sidecar.client import RemoteError, SidecarClient  # noqa: E402

KEY = "conformance~conformance"
CIMD = "https://conformance-test.local/client-metadata.json"  # the URL the suite's CIMD scenario accepts
MAX_SIGN_INS = 3  # the suite's scope-retry-limit: never more than three authorization requests


def say(*parts: object) -> None:
    print("[adapter]", *parts, file=sys.stderr, flush=True)


async def browser(params: dict[str, Any]) -> dict[str, Any]:
    """``ui/openUrl``: what a browser does with the sign-in page, minus the user (the suite's
    authorization endpoint redirects at once)."""
    async with httpx2.AsyncClient(timeout=10, follow_redirects=False) as http:
        page = await http.get(params["url"])
        location = page.headers.get("location")
        if page.status_code not in (301, 302, 303, 307, 308) or not location:
            say("the authorization page answered", page.status_code, "without a redirect")
            return {"opened": True}
        await http.get(location)  # the sidecar's loopback callback
    return {"opened": True}


def login_params(scenario: str, context: dict[str, Any]) -> dict[str, Any]:
    """``mcpServers/login``'s params: with the client the scenario hands out, as a user enters it."""
    params: dict[str, Any] = {"id": KEY}
    if not context.get("client_id"):
        return params
    client: dict[str, Any] = {"clientId": context["client_id"]}
    if scenario.startswith("auth/client-credentials"):
        client["grant"] = "client_credentials"
    if context.get("client_secret"):
        client["clientSecret"] = context["client_secret"]
    if context.get("private_key_pem"):
        client["privateKey"] = context["private_key_pem"]
        client["signingAlgorithm"] = context.get("signing_algorithm", "ES256")
    return params | {"client": client}


async def settled(sc: SidecarClient) -> dict[str, Any]:
    """The server once it is connected, waiting for a sign-in or failed (the sidecar's own connect
    timeout bounds this)."""
    while True:
        server = next(s for s in (await sc.request("mcpServers/list"))["servers"] if s["id"] == KEY)
        if server["status"] in ("connected", "needsAuth", "error"):
            return server
        await anyio.sleep(0.05)


async def run(url: str, scenario: str, context: dict[str, Any]) -> int:
    with tempfile.TemporaryDirectory(prefix="conformance-") as tmp:
        args = ("--secrets-backend", "file", "--log-level", "debug", "--oauth-client-metadata-url", CIMD)
        async with SidecarClient.spawn(Path(tmp) / "data", args=args) as sc:
            sc.handle("ui/openUrl", browser)
            try:
                return await _drive(sc, url, scenario, context)
            finally:
                sys.stderr.write(sc.stderr_text())


async def _drive(sc: SidecarClient, url: str, scenario: str, context: dict[str, Any]) -> int:
    await sc.request("mcpServers/add", {"id": "conformance", "type": "streamable-http", "url": url,
                                        "connectTimeout": 10})
    sign_ins = 0
    server = await settled(sc)
    say("after add:", server["status"], server.get("error"))
    while True:
        if server["status"] == "needsAuth":
            if sign_ins >= MAX_SIGN_INS:
                say("still asks for a sign-in after", sign_ins, "sign-ins: giving up")
                return 1
            sign_ins += 1
            try:
                server = (await sc.request("mcpServers/login", login_params(scenario, context), timeout=60))["server"]
            except RemoteError as exc:
                say("login failed:", exc.code, exc.message)
                return 1
            say("after login:", server["status"], server.get("error"))
            if server["status"] == "needsAuth":
                continue  # the server wants more (a scope step-up at once): the user signs in again
        if server["status"] != "connected":
            say("not connected:", server["status"], server.get("error"))
            return 1
        tools = (await sc.request("tools/list", {"toolsetIds": ["conformance"]}))["tools"]
        if not tools:
            say("the server lists no tools")
            return 1
        call = (await sc.request("tools/call", {"toolId": tools[0]["id"], "args": {}}, timeout=60))["toolCall"]
        say("tool call:", call["status"], json.dumps(call.get("error"))[:300])
        if call["status"] == "success":
            return 0
        server = await settled(sc)
        if server["status"] != "needsAuth":
            return 1


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit(f"usage: {sys.argv[0]} SERVER_URL")
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    sys.exit(anyio.run(run, sys.argv[-1], scenario, context))


if __name__ == "__main__":
    main()

"""A toolset installed from a URL through the real `python -m sidecar`: over HTTPS from a local
server whose test CA the process is told to trust (SSL_CERT_FILE, the standard variable), checked
for an update, upgraded in place with the user's override kept; and a redirect to a private address
refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from sidecar.client import RemoteError, SidecarClient
from tests.http_server import HttpServer, Response
from tests.toolsets.url_bundles import bundle, serve_bundle, sha, tls_for

pytestmark = pytest.mark.anyio


async def test_install_check_and_upgrade_from_an_https_url(tmp_path: Path) -> None:
    server_tls, _ = tls_for("localhost", tmp_path / "tls")
    with HttpServer("127.0.0.1", tls=server_tls) as server:
        v1, v2 = bundle("1.0.0"), bundle("1.1.0", extra_tool=True)
        url = serve_bundle(server, "/inventory.zip", v1, etag='"one"').replace("127.0.0.1", "localhost")
        env = {"SSL_CERT_FILE": str(tmp_path / "tls" / "ca.pem")}
        async with SidecarClient.spawn(tmp_path / "data", env=env, args=("--log-level", "debug")) as sidecar:
            toolset = (await sidecar.request("toolsets/import", {"url": url, "sha256": sha(v1)}))["toolset"]
            assert (toolset["sourceType"], toolset["sourceRef"], toolset["version"]) == ("url", url, "1.0.0")
            await sidecar.request("tools/setOverride", {"toolsetId": "inventory", "toolId": "inventory:get_item",
                                                        "descriptionOverride": "Mine"})
            check = await sidecar.request("toolsets/checkUpdate", {"id": "inventory"})
            assert (check["updateAvailable"], check["notModified"]) == (False, True)

            serve_bundle(server, "/inventory.zip", v2, etag='"two"')
            check = await sidecar.request("toolsets/checkUpdate", {"id": "inventory"})
            assert (check["updateAvailable"], check["availableVersion"]) == (True, "1.1.0")
            done = await sidecar.request("toolsets/upgrade", {"id": "inventory"})
            assert (done["upgraded"], done["toolset"]["version"]) == (True, "1.1.0")
            tools = {t["id"]: t for t in (await sidecar.request("tools/list", {"includeDisabled": True}))["tools"]}
            assert tools["inventory:get_item"]["description"] == "Mine"
            assert "inventory:list_items" in tools

            server.route("GET", "/moved", Response(301, headers={"Location": "https://192.168.0.10/inventory.zip"}))
            with pytest.raises(RemoteError) as caught:
                await sidecar.request("toolsets/import", {"url": url.replace("/inventory.zip", "/moved"),
                                                          "replace": True})
            assert caught.value.code == -32012 and caught.value.data["reason"] == "private"
            assert (await sidecar.request("toolsets/get", {"id": "inventory"}))["toolset"]["version"] == "1.1.0"
        assert server.server_names[0] == "localhost"
        assert sidecar.proc.returncode == 0, sidecar.stderr_text()

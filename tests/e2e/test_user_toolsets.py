"""A toolset made in the UI, in the real sidecar process (issue 14): create it, put an HTTP tool,
run it from the "+" palette as +slug in a chat, and see a bad slug refused with what to fix; the
toolset and its tool are still there after a restart."""

from __future__ import annotations

from pathlib import Path

import pytest

from sidecar.client import RemoteError, SidecarClient
from tests.http_server import HttpServer, Response

pytestmark = pytest.mark.anyio


async def test_make_a_toolset_put_a_tool_and_run_it_by_slug(data_dir: Path, http_server: HttpServer):
    http_server.route("GET", "/weather/Valletta", Response(json={"city": "Valletta", "temp": 21}))
    definition = {"description": "Today's weather in a city", "tags": ["weather"],
                  "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}},
                                  "required": ["city"]},
                  "http": {"urlTemplate": f"http://{http_server.netloc}/weather/${{city}}",
                           "allowedHosts": ["127.0.0.1"]}}
    async with SidecarClient.spawn(data_dir) as sc:
        await sc.request("toolsets/create", {"id": "mine", "name": "My tools"})
        tool = (await sc.request("tools/put", {"toolsetId": "mine", "slug": "météo", "version": "1",
                                               "definition": definition}))["tool"]
        assert (tool["slug"], tool["version"], tool["tags"]) == ("météo", "1", ["weather"])
        with pytest.raises(RemoteError) as caught:
            await sc.request("tools/put", {"toolsetId": "mine", "slug": "weather_now", "version": "1",
                                           "definition": definition})
        assert caught.value.code == -32602
        assert caught.value.data["path"] == "params.slug" and "use '-' instead" in caught.value.data["reason"]

        chat = (await sc.request("chats/create", {"title": "t"}))["chat"]["id"]
        ran = await sc.request("chat/invokeTool", {"chatId": chat, "toolId": "+météo", "args": {"city": "Valletta"}})
        assert ran["toolCall"]["toolId"] == tool["id"] and ran["toolCall"]["status"] == "success"
        assert ran["toolCall"]["result"] == {"city": "Valletta", "temp": 21}
        assert ran["message"]["role"] == "tool"
    assert sc.proc.returncode == 0

    async with SidecarClient.spawn(data_dir) as sc:
        again = (await sc.request("tools/get", {"id": tool["id"]}))["tool"]
        assert {k: again[k] for k in ("slug", "version", "createdAt", "modifiedAt")} == \
            {k: tool[k] for k in ("slug", "version", "createdAt", "modifiedAt")}
        made = (await sc.request("toolsets/list"))["toolsets"]
        assert [(t["id"], t["sourceType"]) for t in made] == [("mine", "user")]

"""Bundle ZIPs made in memory for the URL import tests: a toolset of HTTP tools only (installing it
starts no worker), with a secret and a plain config field, in the version asked for."""

from __future__ import annotations

import hashlib
import io
import os
import zipfile

from tests.http_server import HttpServer, Request, Response


def bundle(version: str = "1.0.0", toolset_id: str = "inventory", extra_tool: bool = False, filler: int = 0) -> bytes:
    """``filler``: that many random bytes in an asset, stored as they are (to make a bundle big)."""
    tools = ["""  - id: get_item
    description: Fetch one item
    input_schema: {type: object, properties: {id: {type: string}}, required: [id]}
    http:
      urlTemplate: "https://${api_host}/items/${id}"
      headers: {X-Api-Key: "${api_key}"}
      allowedHosts: ["api.example.com"]
"""]
    if extra_tool:
        tools.append("""  - id: list_items
    description: List every item (new in 2.0)
    http:
      urlTemplate: "https://${api_host}/items"
      allowedHosts: ["api.example.com"]
""")
    manifest = f"""manifest_version: "1"
id: {toolset_id}
name: Inventory
version: "{version}"
description: Items of an inventory API
config_schema:
  api_host: {{description: "host of the API", default: "api.example.com"}}
  api_key: {{description: "Your API key", secret: true, required: true}}
tools:
{"".join(tools)}"""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("toolset.yaml", manifest)
        z.writestr("README.md", f"Inventory {version}\n")
        if filler:
            z.writestr("assets/noise.bin", os.urandom(filler), compress_type=zipfile.ZIP_STORED)
    return buffer.getvalue()


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def serve_bundle(server: HttpServer, path: str, data: bytes, etag: str | None = None) -> str:
    """Serve ``data`` at ``path`` (answering 304 to a matching If-None-Match); returns its URL."""
    headers = {"Content-Type": "application/zip"} | ({"ETag": etag} if etag else {})

    def answer(request: Request) -> Response:
        if etag is not None and request.header("If-None-Match") == etag:
            return Response(304, headers={"ETag": etag})
        return Response(body=data, headers=headers)

    server.route("GET", path, handler=answer)
    return server.url + path

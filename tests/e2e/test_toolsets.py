"""toolsets/* through the real process."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from sidecar.client import SidecarClient

pytestmark = pytest.mark.anyio

EXAMPLE = Path(__file__).resolve().parents[1] / "fixtures" / "toolsets" / "app-builder"

SERVERS = '''
mcp_servers:
  - id: search
    command: npx
    args: ["-y", "search-server", "--api-key", "sk-live-123", "--region=eu"]
    env:
      API_KEY: "${SEARCH_API_KEY}"
      LITERAL_TOKEN: "abc123"
  - id: remote
    type: streamable-http
    url: "https://user:pw@example.com/mcp?token=secret&mode=fast"
    headers:
      Authorization: "Bearer hunter2"
'''


async def test_inspect_shows_what_would_be_installed_with_secrets_masked(sidecar: SidecarClient, tmp_path: Path, data_dir: Path):
    folder = tmp_path / "ts"
    shutil.copytree(EXAMPLE, folder)
    with open(folder / "toolset.yaml", "a") as f:
        f.write(SERVERS)
    got = await sidecar.request("toolsets/inspect", {"path": str(folder)})
    assert got["manifest"]["id"] == "app-builder" and got["sourceType"] == "local"
    assert [t["id"] for t in got["tools"]] == ["app-builder:write_file", "app-builder:read_file",
                                             "app-builder:run_command", "app-builder:word_stats"]
    run = got["tools"][2]
    assert run["requiresConfirmation"] is True and run["timeout"] == 30 and run["renderer"] == "code"
    search, remote = got["mcpServers"]
    assert search["command"] == ["npx", "-y", "search-server", "--api-key", "****", "--region=eu"]
    assert search["env"] == {"API_KEY": "${SEARCH_API_KEY}", "LITERAL_TOKEN": "****"}
    assert remote["url"] == "https://****@example.com/mcp?token=****&mode=fast"
    assert remote["headers"] == {"Authorization": "****"}
    text = str(got)
    for secret in ("sk-live-123", "abc123", "hunter2", "secret", "pw@"):
        assert secret not in text
    assert {f["path"]: f["kind"] for f in got["files"]}["artifacts/stats.html"] == "artifact"
    assert not (data_dir / "toolsets").exists()  # inspect installs nothing


async def test_inspect_rejections_are_invalid_bundle_with_the_place(sidecar: SidecarClient, tmp_path: Path):
    folder = tmp_path / "ts"
    shutil.copytree(EXAMPLE, folder)
    text = (folder / "toolset.yaml").read_text().replace("tools.files:read_file", "tools.files:nope")
    (folder / "toolset.yaml").write_text(text)
    reply = await sidecar.request_raw("toolsets/inspect", {"path": str(folder)})
    error = reply["error"]
    assert error["code"] == -32013
    assert error["data"] == {"path": "toolset.yaml: tools[1].entrypoint",
                             "reason": '"tools.files:nope" has no function nope in tools/files.py'}
    missing = await sidecar.request_raw("toolsets/inspect", {"path": str(tmp_path / "nothing.zip")})
    assert missing["error"]["code"] == -32013 and "does not exist" in missing["error"]["message"]
    assert await sidecar.request("ping") == {}

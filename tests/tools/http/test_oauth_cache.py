"""The OAuth2 token cache in a running app: kept through upgrades, gone with its toolset."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sidecar.client import SidecarClient
from sidecar.secrets.store import write_private

pytestmark = pytest.mark.anyio

EXAMPLE = Path(__file__).resolve().parents[2] / "fixtures" / "toolsets" / "app-builder"


async def test_an_uninstalled_toolsets_tokens_leave_the_secret_store(data_dir: Path) -> None:
    token = json.dumps({"accessToken": "at-Gone4Yq8Lp", "source": "x"})
    # Another toolset's token and the user's own secret stay.
    write_private(data_dir / "secrets.json", {"version": 1, "secrets": {
        "oauth:app-builder:word_stats": token, "oauth:other:tool": token, "ACME_KEY": "k-Stay7Wd2"}})
    async with SidecarClient.in_process(data_dir) as app:
        await app.request("toolsets/import", {"path": str(EXAMPLE)})
        await app.request("toolsets/setEnabled", {"id": "app-builder", "enabled": False})
        assert "oauth:app-builder:word_stats" in json.loads((data_dir / "secrets.json").read_text())["secrets"]
        await app.request("toolsets/uninstall", {"id": "app-builder"})
    left = json.loads((data_dir / "secrets.json").read_text())["secrets"]
    assert set(left) == {"oauth:other:tool", "ACME_KEY"}

"""toolsets/export redacts by meaning: secrets (by their key, their shape, or because the secret store
holds them) become ${NAME} placeholders that never collide, everything else is exported as it is, and
inspecting the export asks for each placeholder."""

from __future__ import annotations

import json
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

from sidecar.client import SidecarClient
from tests.e2e.test_mcp import FIXTURES

pytestmark = pytest.mark.anyio

# Words, no secret-looking key: only the secret store knows it is one.
STORED = "bluebird-garden-path"
KEY_A = "sk-live-first-1111aaaa"
KEY_B = "sk-live-second-2222bbbb"


def manifest(servers: str) -> str:
    return f'manifest_version: "1"\nid: pair\nname: Pair\nmcp_servers:\n{servers}'


async def test_an_export_names_each_secret_once_keeps_the_rest_and_its_import_asks_for_each(
        app: SidecarClient, tmp_path: Path):
    await app.request("secrets/set", {"name": "GARDEN_PASS", "value": STORED})
    python, script = json.dumps(sys.executable), json.dumps(str(FIXTURES / "basic.py"))
    folder = tmp_path / "pair"
    folder.mkdir()
    (folder / "toolset.yaml").write_text(manifest(
        f"  - id: one\n    command: {python}\n    args: [{script}, --api-key, {KEY_A}, --region=eu]\n"
        f"    env: {{API_KEY: {KEY_A}, LOG_LEVEL: debug, MEMORY_FILE_PATH: /tmp/m.json, NOTE: {STORED}}}\n"
        f"  - id: two\n    type: streamable-http\n"
        f"    url: 'https://mcp.example.com/mcp?api_key={KEY_B}&mode=fast'\n"
        f"    headers: {{X-Team: core, X-Api-Key: {KEY_B}, Authorization: 'Bearer {KEY_A}'}}\n"
        f"    env: {{API_KEY: {KEY_B}}}\n"))
    await app.request("toolsets/import", {"path": str(folder)})

    out = tmp_path / "pair.zip"
    exported = await app.request("toolsets/export", {"id": "pair", "path": str(out)})
    with zipfile.ZipFile(out) as z:
        text = z.read("toolset.yaml").decode()
    for secret in (STORED, KEY_A, KEY_B):
        assert secret not in text
    one, two = yaml.safe_load(text)["mcp_servers"]
    # Not secret: as it was.
    assert one["env"]["LOG_LEVEL"] == "debug" and one["env"]["MEMORY_FILE_PATH"] == "/tmp/m.json"
    assert "--region=eu" in one["args"] and two["headers"]["X-Team"] == "core" and "mode=fast" in two["url"]
    # From the secret store: under the name it has there, though nothing about NOTE says secret.
    assert one["env"]["NOTE"] == "${GARDEN_PASS}"
    # Two different secrets under one key get two names; one secret keeps one name wherever it is.
    first, second = one["env"]["API_KEY"], two["env"]["API_KEY"]
    assert first != second and {first, second} == {"${API_KEY}", "${API_KEY_2}"}
    assert one["args"][2] == first and two["headers"]["Authorization"] == f"Bearer {first}"
    assert two["headers"]["X-Api-Key"] == second and f"api_key={second}" in two["url"]
    assert exported["variables"] == ["API_KEY", "GARDEN_PASS", "API_KEY_2"]

    # Whoever imports it is asked for each, and told which are set here already.
    inspected = await app.request("toolsets/inspect", {"path": str(out)})
    asked = {v["name"]: v for v in inspected["variables"]}
    assert set(asked) == {"API_KEY", "API_KEY_2", "GARDEN_PASS"}
    assert asked["GARDEN_PASS"]["set"] is True and asked["GARDEN_PASS"]["usedBy"] == ["one"]
    assert asked["API_KEY"]["set"] is False and asked["API_KEY"]["usedBy"] == ["one", "two"]
    assert asked["API_KEY_2"]["usedBy"] == ["two"]

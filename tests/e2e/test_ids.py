"""Ids from outside are matched whole: a trailing newline is not a valid id anywhere, and nothing
is stored or created under one."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import msgspec
import pytest

from sidecar.api.base import Id, is_id
from sidecar.client import SidecarClient

pytestmark = pytest.mark.anyio

EXAMPLE = Path(__file__).resolve().parents[1] / "fixtures" / "toolsets" / "app-builder"
MCP_SERVER = Path(__file__).resolve().parents[1] / "fixtures" / "mcp" / "basic.py"
INVALID_PARAMS, INVALID_BUNDLE = -32602, -32013

BAD = ["nl\n", "a\n\n", "\na", "ok\r", "", "-dash", "x" * 65, "a/b", "a~b", "a:b", "..", "é"]
GOOD = ["a", "x" * 64, "app-builder", "v1.2_x-3", "0"]


@pytest.mark.parametrize("value", BAD)
def test_bad_ids_are_refused_by_the_rule_and_by_its_schema_type(value: str):
    assert not is_id(value)
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert(value, Id)


@pytest.mark.parametrize("value", GOOD)
def test_good_ids_pass(value: str):
    assert is_id(value)
    assert msgspec.convert(value, Id) == value


def names_with_a_newline(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if "\n" in p.name or "\r" in p.name]


async def test_a_newline_ended_id_is_refused_everywhere_and_creates_nothing(
    sidecar: SidecarClient, tmp_path: Path, data_dir: Path
):
    folder = tmp_path / "ts"
    shutil.copytree(EXAMPLE, folder)
    manifest = folder / "toolset.yaml"
    manifest.write_text(manifest.read_text().replace("id: app-builder", 'id: "nl\\n"', 1))
    reply = await sidecar.request_raw("toolsets/import", {"path": str(folder)})
    assert reply["error"]["code"] == INVALID_BUNDLE, reply
    assert reply["error"]["data"]["path"] == "toolset.yaml: id"

    reply = await sidecar.request_raw(
        "mcpServers/add", {"id": "nl\n", "command": sys.executable, "args": [str(MCP_SERVER)]}
    )
    assert reply["error"]["code"] == INVALID_PARAMS, reply
    assert reply["error"]["data"]["path"] == "params.id"

    reply = await sidecar.request_raw("providers/set", {"id": "nl\n", "kind": "openai"})
    assert reply["error"]["code"] == INVALID_PARAMS, reply
    assert reply["error"]["data"]["path"] == "params.id"

    assert (await sidecar.request("toolsets/list"))["toolsets"] == []
    assert (await sidecar.request("mcpServers/list"))["servers"] == []
    assert [p["id"] for p in (await sidecar.request("providers/list"))["providers"]] == ["scripted"]
    assert names_with_a_newline(data_dir) == []

"""slug, version and tags in toolset.yaml (issue 14 part 2), and createdAt / modifiedAt across an
upgrade: a tool the new bundle keeps as it was keeps both; one it changed gets a new modifiedAt."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from sidecar.client import RemoteError, SidecarClient
from sidecar.errors import ManifestError
from sidecar.toolsets.manifest import from_data

pytestmark = pytest.mark.anyio

HTTP = {"urlTemplate": "https://api.example.com/x", "allowedHosts": ["api.example.com"]}


def manifest(*tools: dict[str, Any]) -> dict[str, Any]:
    return {"manifest_version": "1", "id": "shop", "name": "Shop",
            "tools": [{"http": copy.deepcopy(HTTP), **t} for t in tools]}


def test_a_manifest_may_name_slug_version_and_tags() -> None:
    tools = from_data(manifest({"id": "get_item", "slug": "item", "version": "2.1", "tags": ["read", " read "]},
                               {"id": "list_items"})).manifest.tools
    assert [(t.slug, t.version, t.tags) for t in tools] == [("item", "2.1", ["read"]), ("list-items", "1", [])]


@pytest.mark.parametrize(("tool", "path", "says"), [
    ({"id": "a", "slug": "get_item"}, "tools[0].slug", "has '_'; use '-' instead"),
    ({"id": "a", "slug": "a b"}, "tools[0].slug", "whitespace"),
    ({"id": "a", "slug": "🙂"}, "tools[0].slug", "U+1F642"),
    ({"id": "a", "slug": "x" * 65}, "tools[0].slug", "65 characters"),
    ({"id": "a", "slug": "a\u202eb"}, "tools[0].slug", "RIGHT-TO-LEFT OVERRIDE"),
    ({"id": "a", "version": "1/2"}, "tools[0].version", "has '/'"),
    ({"id": "a", "tags": ["\x00"]}, "tools[0].tags[0]", "control or format character"),
])
def test_bad_slugs_versions_and_tags_in_a_manifest_name_the_field(tool: dict[str, Any], path: str, says: str) -> None:
    with pytest.raises(ManifestError) as caught:
        from_data(manifest(tool))
    assert caught.value.data == {"path": path, "reason": caught.value.data["reason"]}
    assert says in caught.value.data["reason"]


def test_two_ids_that_make_one_slug_are_refused_saying_how_to_fix_it() -> None:
    with pytest.raises(ManifestError) as caught:
        from_data(manifest({"id": "get_item"}, {"id": "get-item"}))
    assert caught.value.data["path"] == "tools[1].slug"
    assert "'get-item' version '1' is also tools[0]'s (made from its id 'get-item'; give this tool a slug" in \
        caught.value.data["reason"]
    # Two versions of one slug are fine.
    from_data(manifest({"id": "get_item"}, {"id": "get_item_v2", "slug": "get-item", "version": "2"}))


def write(folder: Path, *tools: dict[str, Any]) -> Path:
    folder.mkdir(exist_ok=True)
    (folder / "toolset.yaml").write_text(yaml.safe_dump(manifest(*tools)))
    return folder


async def test_an_upgrade_keeps_created_at_and_moves_modified_at_of_changed_tools_only(app: SidecarClient,
                                                                                    tmp_path: Path):
    folder = write(tmp_path / "shop", {"id": "kept", "description": "same"}, {"id": "edited", "description": "v1"},
                   {"id": "old", "slug": "item"}, {"id": "new", "slug": "item", "version": "2"})
    await app.request("toolsets/import", {"path": str(folder)})
    got = await app.request("toolsets/get", {"id": "shop"})
    toolset, before = got["toolset"], {t["id"]: t for t in got["tools"]}
    assert (before["shop:old"]["current"], before["shop:new"]["current"]) == (False, True)  # the last declared

    await app.request("toolsets/import", {"path": str(folder), "replace": True})  # the same bundle again
    same = await app.request("toolsets/get", {"id": "shop"})
    assert same["toolset"]["modifiedAt"] == toolset["modifiedAt"]
    assert {t["id"]: t["modifiedAt"] for t in same["tools"]} == {k: t["modifiedAt"] for k, t in before.items()}

    write(folder, {"id": "kept", "description": "same"}, {"id": "edited", "description": "v2"},
          {"id": "new", "slug": "item", "version": "2"}, {"id": "old", "slug": "item"})
    await app.request("toolsets/import", {"path": str(folder), "replace": True})
    got = await app.request("toolsets/get", {"id": "shop"})
    assert got["toolset"]["modifiedAt"] > toolset["modifiedAt"]
    assert got["toolset"]["createdAt"] == toolset["createdAt"]
    after = {t["id"]: t for t in got["tools"]}
    assert all(after[k]["createdAt"] == before[k]["createdAt"] for k in before)
    assert after["shop:kept"]["modifiedAt"] == before["shop:kept"]["modifiedAt"]
    assert after["shop:edited"]["modifiedAt"] > before["shop:edited"]["modifiedAt"]
    assert (after["shop:old"]["current"], after["shop:new"]["current"]) == (True, False)
    with pytest.raises(RemoteError) as caught:
        await app.request("tools/put", {"toolsetId": "shop", "slug": "x", "version": "1",
                                        "definition": {"http": HTTP}})
    assert "was imported (local)" in caught.value.message


async def test_a_tool_kept_unavailable_leaves_its_slug_to_the_tool_that_replaced_it(app: SidecarClient,
                                                                                   tmp_path: Path):
    folder = write(tmp_path / "shop", {"id": "old", "slug": "item"})
    await app.request("toolsets/import", {"path": str(folder)})
    await app.request("tools/setOverride", {"toolsetId": "shop", "toolId": "old", "nameOverride": "Mine"})
    write(folder, {"id": "new", "slug": "item"})  # the same slug under a new id
    await app.request("toolsets/import", {"path": str(folder), "replace": True})
    tools = {t["id"]: t for t in (await app.request("tools/list", {"includeDisabled": True,
                                                                   "toolsetIds": ["shop"]}))["tools"]}
    assert tools["shop:old"]["status"] == "unavailable" and tools["shop:old"]["name"] == "Mine"
    assert (tools["shop:new"]["slug"], tools["shop:new"]["current"]) == ("item", True)

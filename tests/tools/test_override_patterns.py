"""Overrides whose tool id is a pattern (seed 001 "Future", issue 14 part 9): they apply to every
matching tool of their toolset, stored and MCP tools alike; patterns layer from the least to the
most specific and the tool's exact override wins; tools/get says which applied."""

from __future__ import annotations

import io
import shutil
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from sidecar.client import RemoteError, SidecarClient
from sidecar.store.toolsets import OverrideRow
from sidecar.tools.overrides import layer, matches, pattern_problem
from tests.e2e.test_mcp_meta import add_meta

pytestmark = pytest.mark.anyio

CHECKED = Path(__file__).resolve().parents[1] / "fixtures" / "toolsets" / "checked"


@pytest.mark.parametrize(("pattern", "key", "hit"), [
    ("fs:*", "fs:read_file", True),
    ("fs:*", "fsx:read_file", False),
    ("*:read_*", "fs:read_file", True),
    ("*:read_*", "ts:read", False),
    ("*:read_*", "fs:write_file", False),
    ("ts:rep?rt", "ts:report", True),
    ("ts:rep?rt", "ts:reprt", False),
    ("ts:*", "ts:Report", True),
    ("ts:r*", "ts:Report", False),  # case counts, as in ids
    ("t.s:*", "tXs:a", False),  # '.' is itself
])
def test_what_a_pattern_matches(pattern: str, key: str, hit: bool) -> None:
    assert matches(pattern, key) is hit


@pytest.mark.parametrize("pattern", ["fs:*:x", "fs", "[ab]:*", "fs:read[_]*", "fs:*/x", "fs: *", ":*", "fs:" + "*" * 65])
def test_a_malformed_pattern_is_named(pattern: str) -> None:
    assert pattern_problem(pattern) is not None


def test_patterns_layer_from_least_to_most_specific_and_the_exact_one_wins() -> None:
    everything = OverrideRow(tool_id="*:*", description_override="any", requires_confirmation=True)
    reads = OverrideRow(tool_id="*:read_*", description_override="a read", renderer="code")
    server = OverrideRow(tool_id="fs:*", description_override="fs tool", enabled=False)
    exact = OverrideRow(tool_id="fs:read_file", enabled=True)
    blank = OverrideRow(tool_id="fs:read_f*")  # sets nothing: not applied
    combined, applied = layer(exact, [everything, server, reads, blank], "fs:read_file")
    # "*:read_*" has 6 literal characters, "fs:*" 3: the read pattern is more specific.
    assert applied == ["fs:read_file", "*:read_*", "fs:*", "*:*"]
    assert combined is not None
    assert (combined.description_override, combined.renderer, combined.requires_confirmation, combined.enabled) == (
        "a read", "code", True, True)
    assert layer(None, [everything, reads], "fs:write") == (everything, ["*:*"])
    assert layer(None, [reads], "fs:write") == (None, [])


async def install(sc: SidecarClient, tmp_path: Path) -> None:
    shutil.copytree(CHECKED, tmp_path / "checked")
    await sc.request("toolsets/import", {"path": str(tmp_path / "checked")})


async def override(sc: SidecarClient, tool_id: str, toolset_id: str = "checked", **fields: Any) -> dict[str, Any]:
    return await sc.request("tools/setOverride", {"toolsetId": toolset_id, "toolId": tool_id, **fields})


async def tool(sc: SidecarClient, tool_id: str) -> dict[str, Any]:
    return (await sc.request("tools/get", {"id": tool_id}))["tool"]


async def test_a_pattern_applies_to_every_matching_stored_tool_and_the_exact_one_wins(app: SidecarClient,
                                                                                        tmp_path: Path):
    await install(app, tmp_path)
    everything = await override(app, "*", descriptionOverride="from the toolset")  # its own tools: checked:*
    assert "tool" not in everything
    assert sorted(t["id"] for t in everything["matched"]) == ["checked:count", "checked:loose", "checked:report",
                                                              "checked:untyped"]
    some = await override(app, "checked:*o*", requiresConfirmation=True)
    assert sorted(t["id"] for t in some["matched"]) == ["checked:count", "checked:loose", "checked:report"]
    exact = await override(app, "report", descriptionOverride="the report")
    assert exact["tool"]["overridesApplied"] == ["checked:report", "checked:*o*", "checked:*"]

    report, untyped = await tool(app, "checked:report"), await tool(app, "checked:untyped")
    assert (report["description"], report["requiresConfirmation"]) == ("the report", True)
    assert (untyped["description"], untyped["requiresConfirmation"]) == ("from the toolset", False)
    assert untyped["overridesApplied"] == ["checked:*"]
    listed = {t["id"]: t for t in (await app.request("tools/list"))["tools"]}
    assert listed["checked:loose"]["overridesApplied"] == ["checked:*o*", "checked:*"]

    # A pattern that switches tools off; the exact override of one switches it back on.
    await override(app, "checked:*", enabled=False)
    await override(app, "report", enabled=True)
    enabled = {t["id"] for t in (await app.request("tools/list"))["tools"] if t["id"].startswith("checked:")}
    assert enabled == {"checked:report"}
    with pytest.raises(RemoteError) as err:
        await app.request("tools/call", {"toolId": "checked:loose", "args": {}})
    assert "disabled" in err.value.message
    # Cleared fields leave a pattern that sets nothing: it no longer applies.
    await override(app, "checked:*", enabled=None, descriptionOverride=None)
    assert "overridesApplied" not in await tool(app, "checked:untyped")  # (an empty list is left out)


@pytest.mark.parametrize(("pattern", "path_word"), [
    ("checked:*:x", "two parts"), ("[rl]*", "may only hold"), ("*/x", "may only hold"),
    ("mcp:other~meta:*", "names the toolset 'other'"),
])
async def test_a_malformed_pattern_is_invalid_params(app: SidecarClient, tmp_path: Path, pattern: str,
                                                     path_word: str):
    await install(app, tmp_path)
    with pytest.raises(RemoteError) as err:
        await override(app, pattern, descriptionOverride="x")
    assert err.value.code == -32602 and err.value.data["path"] == "params.toolId"
    assert path_word in err.value.message


async def test_a_pattern_reaches_mcp_tools_and_waits_for_tools_not_listed_yet(app: SidecarClient):
    await add_meta(app)
    reads = await override(app, "*:read_*", toolset_id="meta", requiresConfirmation=True)
    assert [t["id"] for t in reads["matched"]] == ["mcp:meta~meta:read_note"]
    await override(app, "mcp:meta~meta:*_note", toolset_id="meta", descriptionOverride="a note tool")
    nothing = await override(app, "meta:zzz*", toolset_id="meta", enabled=False)
    assert nothing["matched"] == []
    read, delete = await tool(app, "mcp:meta~meta:read_note"), await tool(app, "mcp:meta~meta:delete_note")
    assert read["requiresConfirmation"] is True and read["description"] == "a note tool"
    assert read["overridesApplied"] == ["meta:*_note", "*:read_*"]
    assert delete["overridesApplied"] == ["meta:*_note"] and delete["description"] == "a note tool"
    # An exact override still wins over the patterns, field by field.
    exact = await override(app, "mcp:meta~meta:read_note", toolset_id="meta", requiresConfirmation=False)
    assert exact["tool"]["requiresConfirmation"] is False and exact["tool"]["description"] == "a note tool"


async def test_a_disabled_toolset_takes_no_pattern(app: SidecarClient, tmp_path: Path):
    await install(app, tmp_path)
    await app.request("toolsets/setEnabled", {"id": "checked", "enabled": False})
    with pytest.raises(RemoteError) as err:
        await override(app, "*", descriptionOverride="x")
    assert err.value.code == -32009 or "disabled" in err.value.message


async def test_export_and_import_keep_patterns(app: SidecarClient, tmp_path: Path):
    await install(app, tmp_path)
    await override(app, "rep*", descriptionOverride="reports")
    await override(app, "srv:read_*", renderer="code")  # an MCP server this toolset may declare later
    out = tmp_path / "out.zip"
    await app.request("toolsets/export", {"id": "checked", "path": str(out)})
    manifest = yaml.safe_load(zipfile.ZipFile(io.BytesIO(out.read_bytes())).read("toolset.yaml"))
    kept = {o["tool_id"]: o for o in manifest["tool_overrides"]}
    assert kept["rep*"]["description_override"] == "reports" and kept["srv:read_*"]["renderer"] == "code"
    await app.request("toolsets/uninstall", {"id": "checked"})
    await app.request("toolsets/import", {"path": str(out)})
    report = await tool(app, "checked:report")
    assert report["description"] == "reports" and report["overridesApplied"] == ["checked:rep*"]


async def test_a_manifest_with_a_malformed_pattern_is_refused(app: SidecarClient, tmp_path: Path):
    shutil.copytree(CHECKED, tmp_path / "checked")
    manifest = tmp_path / "checked" / "toolset.yaml"
    manifest.write_text(manifest.read_text() + "tool_overrides:\n  - {tool_id: 'a:b:*', enabled: false}\n")
    with pytest.raises(RemoteError) as err:
        await app.request("toolsets/import", {"path": str(tmp_path / "checked")})
    assert "tool_overrides[0].tool_id" in err.value.message and "not a tool pattern" in err.value.message



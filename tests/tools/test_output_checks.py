"""Results checked against their tool's output schema (issue 14 part 7): a Python tool's return
annotation becomes its schema, a result that breaks it fails the call naming the place, and a
hostile schema neither reaches the network nor hangs the check."""

from __future__ import annotations

import shutil
import socket
from pathlib import Path
from typing import Any

import anyio
import pytest

from sidecar.client import SidecarClient
from sidecar.tools import result_schema
from sidecar.tools.result_schema import problem
from tests.timing import scaled

pytestmark = pytest.mark.anyio

CHECKED = Path(__file__).resolve().parents[1] / "fixtures" / "toolsets" / "checked"


async def install(sc: SidecarClient, tmp_path: Path) -> Path:
    folder = tmp_path / "checked"
    shutil.copytree(CHECKED, folder)
    await sc.request("toolsets/import", {"path": str(folder)})
    return folder


async def call(sc: SidecarClient, tool: str, args: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return (await sc.request("tools/call", {"toolId": f"checked:{tool}", "args": args, **extra}, timeout=120))[
        "toolCall"]


async def test_a_python_tools_return_annotation_is_its_output_schema(app: SidecarClient, tmp_path: Path):
    await install(app, tmp_path)
    schema = (await app.request("tools/get", {"id": "checked:report"}))["tool"]["outputSchema"]
    assert schema["$ref"] == "#/$defs/Report"
    assert schema["$defs"]["Stats"]["properties"]["rows"] == {"type": "integer"}
    assert schema["$defs"]["Report"]["required"] == ["stats", "notes"]
    # No annotation, or Any: nothing to check against.
    for name in ("untyped", "loose"):
        assert "outputSchema" not in (await app.request("tools/get", {"id": f"checked:{name}"}))["tool"]
    listed = {t["id"]: t for t in (await app.request("tools/list"))["tools"]}
    assert listed["checked:report"]["outputSchema"] == schema


async def test_a_result_that_breaks_the_annotation_fails_the_call_naming_the_place(app: SidecarClient,
                                                                                    tmp_path: Path):
    await install(app, tmp_path)
    good = await call(app, "report", {})
    assert good["status"] == "success" and good["result"] == {"stats": {"rows": 12, "table": "orders"}, "notes": []}
    bad = await call(app, "report", {"rows": "many"})
    assert bad["status"] == "error" and bad["errorKind"] == "badOutput"
    assert bad["error"] == "result.stats.rows: expected integer, got string"
    assert bad["result"]["stats"]["rows"] == "many"  # what came back is kept for the audit trail
    audited = (await app.request("toolCalls/list", {"toolId": "checked:report"}))["toolCalls"]
    assert [(c["status"], c.get("errorKind")) for c in audited] == [("error", "badOutput"), ("success", None)]
    # A big result (here about 1 MB) is checked too (off the event loop).
    big = await call(app, "report", {"rows": "lots", "size": 10_000})
    assert big["errorKind"] == "badOutput" and big["error"] == "result.stats.rows: expected integer, got string"
    # Unchecked tools return what they like.
    assert (await call(app, "loose", {"value": "y"}))["result"] == ["y"]


async def test_a_plain_functions_annotation_counts_too(app: SidecarClient, tmp_path: Path):
    await install(app, tmp_path)
    assert (await app.request("tools/get", {"id": "checked:count"}))["tool"]["outputSchema"] == {"type": "integer"}
    chat_id = (await app.request("chats/create", {"title": "t"}))["chat"]["id"]
    assert (await call(app, "count", {"n": "3"}, chatId=chat_id))["result"] == 3
    bad = await call(app, "count", {"n": "three"}, chatId=chat_id)
    assert (bad["errorKind"], bad["error"]) == ("badOutput", "result: expected integer, got string")


async def test_reloading_the_toolset_learns_a_changed_annotation(app: SidecarClient, tmp_path: Path):
    folder = await install(app, tmp_path)
    module = folder / "tools" / "stats.py"
    module.write_text(module.read_text().replace("    rows: int\n", "    rows: int | str\n"))
    # A folder install is followed: saving the module reloads the toolset.
    with anyio.fail_after(scaled(30)):
        while True:
            schema = (await app.request("tools/get", {"id": "checked:report"}))["tool"]["outputSchema"]
            if schema["$defs"]["Stats"]["properties"]["rows"] == {"anyOf": [{"type": "integer"}, {"type": "string"}]}:
                break
            await anyio.sleep(0.05)
    again = await call(app, "report", {"rows": "many"})
    assert again["status"] == "success", again["error"]


# -- the messages, and hostile schemas -----------------------------------------------------------------


NOTE = {"type": "object", "required": ["id"], "additionalProperties": False,
        "properties": {"id": {"type": "integer"}, "kind": {"enum": ["a", "b"]}, "at": {"type": ["string", "null"]},
                       "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2}}}


@pytest.mark.parametrize(("value", "said"), [
    ({"id": 1}, None),
    ({"id": "1"}, "result.id: expected integer, got string"),
    ({}, "result.id: missing (the outputSchema requires it)"),
    ({"id": 1, "extra": 2}, "result.extra: not expected (the outputSchema has no such field)"),
    ({"id": 1, "kind": "c"}, 'result.kind: expected one of "a", "b"'),
    ({"id": 1, "at": 5}, "result.at: expected string or null, got integer"),
    ({"id": 1, "tags": ["x", 2]}, "result.tags[1]: expected string, got integer"),
    ({"id": 1, "tags": ["x", "y", "z"]}, "result.tags: ['x', 'y', 'z'] is too long"),
    ([], "result: expected object, got array"),
])
def test_the_message_says_where_and_what_was_expected(value: Any, said: str | None) -> None:
    assert problem(NOTE, value) == said


def test_a_remote_ref_is_never_fetched() -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.settimeout(0.2)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/schema.json"
        said = problem({"type": "object", "properties": {"a": {"$ref": url}}}, {"a": 1})
        assert said == (f"the tool's outputSchema cannot be checked: it refers to {url!r}, which is not inside "
                        "the schema (remote references are never fetched)")
        with pytest.raises(TimeoutError):
            listener.accept()  # nobody knocked


def test_a_schema_that_cannot_be_used_fails_the_call_saying_why() -> None:
    loop = {"$ref": "#/$defs/A", "$defs": {"A": {"$ref": "#/$defs/A"}}}
    assert "lead round in a circle" in (problem(loop, 1) or "")
    assert "lead round in a circle" in (problem({"$ref": "#"}, 1) or "")
    assert (problem({"type": "nope"}, 1) or "").startswith("the tool's outputSchema cannot be checked: it is not a "
                                                           "valid JSON Schema")
    huge = {"type": "object", "properties": {f"p{i}": {"type": "string", "description": "d" * 100}
                                             for i in range(5000)}}
    assert "KB of JSON, over the 256 KB limit" in (problem(huge, {}) or "")


def test_a_recursive_type_is_checked_to_any_depth_it_has() -> None:
    node = {"$ref": "#/$defs/N", "$defs": {"N": {"type": "object", "required": ["v"], "properties": {
        "v": {"type": "integer"}, "next": {"anyOf": [{"$ref": "#/$defs/N"}, {"type": "null"}]}}}}}
    chain: dict[str, Any] = {"v": 0, "next": None}
    for i in range(1, 50):
        chain = {"v": i, "next": chain}
    assert problem(node, chain) is None
    inner = chain
    for _ in range(49):
        inner = inner["next"]
    inner["v"] = "zero"
    assert problem(node, chain) == "result" + ".next" * 49 + ".v: expected integer, got string"


async def test_an_mcp_result_is_checked_by_its_structured_content() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    assert await result_schema.check(schema, "mcp", {"content": [], "structuredContent": {"n": 1}}) is None
    assert await result_schema.check(schema, "mcp", {"content": [], "structuredContent": {"n": "1"}}) == (
        "result.structuredContent.n: expected integer, got string")
    big = {"content": [], "structuredContent": {"n": "1", "pad": "x" * 200_000}}
    assert await result_schema.check(schema, "mcp", big) == "result.structuredContent.n: expected integer, got string"

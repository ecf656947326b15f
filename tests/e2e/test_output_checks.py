"""Output checks through the real process and a real chat turn (issue 14 part 7): the model is
given the check's error as the tool's result, and the UI sees the schema on the tool."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from sidecar.client import SidecarClient
from tests.e2e.test_chat import new_chat
from tests.e2e.test_tool_output import finished, given, tool_results, turn, unframe

pytestmark = pytest.mark.anyio

CHECKED = Path(__file__).resolve().parents[1] / "fixtures" / "toolsets" / "checked"


async def test_the_model_is_told_where_a_result_broke_its_schema(sidecar: SidecarClient, tmp_path: Path):
    shutil.copytree(CHECKED, tmp_path / "checked")
    await sidecar.request("toolsets/import", {"path": str(tmp_path / "checked")})
    tool = (await sidecar.request("tools/get", {"id": "checked:report"}))["tool"]
    assert tool["outputSchema"]["$defs"]["Stats"]["properties"]["rows"] == {"type": "integer"}
    chat_id = await new_chat(sidecar)
    done = await turn(sidecar, chat_id, "checker",
                      {"toolCalls": [{"tool": "checked:report", "args": {"rows": "many"}}]}, {"echoContext": True})
    call = finished(sidecar, done["messageId"])[0]
    assert call["status"] == "error" and call["errorKind"] == "badOutput"
    _, status, data = unframe(tool_results(await given(sidecar, chat_id, done["messageId"]))[0])
    assert status == "error" and "result.stats.rows: expected integer, got string" in data


async def test_a_big_result_that_fits_is_sent_on_as_it_came(sidecar: SidecarClient, tmp_path: Path):
    shutil.copytree(CHECKED, tmp_path / "checked")
    await sidecar.request("toolsets/import", {"path": str(tmp_path / "checked")})
    call = (await sidecar.request("tools/call", {"toolId": "checked:report", "args": {"size": 10_000}},
                                  timeout=120))["toolCall"]
    assert call["status"] == "success" and len(call["result"]["notes"]) == 10_000  # about 1 MB, checked

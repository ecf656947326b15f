"""tools/relevant through the real `python -m sidecar`: the packaged model loads after initialize,
ranks the built-in tools by meaning, and debug/info says so."""

from __future__ import annotations

import pytest

from sidecar.client import SidecarClient

pytestmark = pytest.mark.anyio


async def test_the_real_process_ranks_by_meaning_and_reports_its_model(sidecar: SidecarClient):
    before = (await sidecar.request("debug/info"))["relevanceModel"]
    assert before["state"] in ("notLoaded", "loading", "loaded")  # initialize did not wait for it
    answer = await sidecar.request("tools/relevant", {"text": "run a shell command",
                                                      "limit": 2})
    assert answer["ranking"] == "fused"
    assert answer["tools"][0]["tool"]["id"] == "run_command" and answer["tools"][0]["tool"]["provider"] == "builtin"
    assert len(answer["tools"]) <= 2
    info = (await sidecar.request("debug/info"))["relevanceModel"]
    assert info["loaded"] is True and info["dimension"] == 384 and info["modelId"].startswith("all-MiniLM-L6-v2")
    assert {"numpy", "onnxruntime"} <= set((await sidecar.request("debug/info"))["heavyModulesLoaded"])


async def test_a_missing_model_file_leaves_the_process_serving_by_words(data_dir, tmp_path):
    async with SidecarClient.spawn(data_dir, env={"SIDECAR_EMBEDDING_MODEL": str(tmp_path / "gone.onnx")}) as c:
        answer = await c.request("tools/relevant", {"text": "run a command"})
        assert answer["ranking"] == "lexical" and "no model file at" in answer["fallbackReason"]
        assert (await c.request("debug/info"))["relevanceModel"]["fallbackReason"] == answer["fallbackReason"]
    assert c.proc.returncode == 0

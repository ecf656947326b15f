"""The generated contract is current, and the golden transcripts still hold."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sidecar.api.lifecycle import SERVER_REQUESTS
from sidecar.api.specs import SPECS
from sidecar.handlers import LIFECYCLE_METHODS
from sidecar.handlers.areas import AREAS
from sidecar.handlers.routes import served_by
from sidecar.transcripts import Mismatch, mismatches, replay

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "protocol" / "examples").glob("*.jsonl"))


def _undescribed_fields() -> list[str]:
    """``Type.field`` for every property of protocol/schema.json's $defs without a description (one
    beside a $ref counts: msgspec puts an Annotated field's description there)."""
    defs = json.loads((ROOT / "protocol" / "schema.json").read_text())["$defs"]
    return [f"{name}.{field}" for name, schema in defs.items()
            for field, prop in schema.get("properties", {}).items()
            if not str(prop.get("description", "")).strip()]


def test_protocol_directory_is_generated_from_the_current_api():
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_protocol.py"), "--check"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_every_field_of_the_contract_has_a_description():
    missing = _undescribed_fields()
    assert not missing, (f"{len(missing)} field(s) of protocol/schema.json have no description; give each an "
                         "Annotated[T, msgspec.Meta(description=...)] in sidecar/api/ and run "
                         "scripts/gen_protocol.py: " + ", ".join(missing))


def test_every_method_has_a_summary():
    assert [s.name for s in SPECS if not s.summary.strip()] == []


def test_every_client_method_has_a_handler_and_every_handler_a_spec():
    served = list(LIFECYCLE_METHODS)
    for area in AREAS:
        served += served_by(area)
    expected = {s.name for s in SPECS if s.direction != "serverToClient"} - {"$/cancelRequest"}
    assert sorted(served) == sorted(expected)  # each once


def test_initialize_lists_every_server_to_client_request_of_the_contract():
    declared = [s.name for s in SPECS if s.direction == "serverToClient" and s.kind == "request"]
    assert sorted(SERVER_REQUESTS) == sorted(declared)


def test_wildcards_and_mismatch_reporting():
    assert mismatches({"a": "<int>", "b": ["<any>"]}, {"a": 3, "b": [None]}) == []
    assert mismatches({"a": "<int>"}, {"a": True}) == ["$.a: True is not <int>"]
    assert mismatches({"a": 1}, {"a": 1, "b": 2}) == ["$.b: unexpected 2"]
    assert mismatches({"a": 1.0}, {"a": 1}) == ["$.a: expected 1.0, got 1"]


@pytest.mark.anyio
@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
async def test_golden_transcript(path: Path, tmp_path: Path):
    await replay(path, tmp_path / "data")


@pytest.mark.anyio
async def test_a_wrong_transcript_fails(tmp_path: Path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"send": {"jsonrpc": "2.0", "id": 1, "method": "initialize"}}\n'
                   '{"recv": {"jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": 0}}}\n')
    with pytest.raises(Mismatch, match=r"protocolVersion: expected 0"):
        await replay(bad, tmp_path / "data")

"""scripts/repl_contract.py: the contract as the REPL reads it."""

from __future__ import annotations

from repl_contract import Contract, schema_text

from tests.scripts.conftest import ROOT


def test_the_repo_contract_loads():
    contract = Contract.load(ROOT / "protocol" / "openrpc.json")
    assert "ping" in contract.methods
    assert contract.error_codes["MethodNotFound"] == -32601
    assert all(m.client_sends for m in contract.client_methods("request"))


def test_schema_text():
    assert schema_text({"type": "integer"}) == "integer"
    assert schema_text({"anyOf": [{"type": "integer"}, {"type": "null"}]}) == \
        "integer | null"
    assert schema_text({"$ref": "#/components/schemas/X"}) == "X"
    assert schema_text({"type": "array", "items": {"type": "string"}}) == "string[]"
    assert schema_text({"enum": ["a", "b"]}) == '"a" | "b"'
    assert schema_text({}) == "any"

"""The REPL's pure modules live in scripts/ (not a package): put them on the path, and give the tests
a small contract to read."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

from repl_contract import Contract  # noqa: E402  (found through the path set just above)

DOC = {
    "info": {"title": "Test", "version": "1"},
    "methods": [
        {"name": "initialize", "summary": "Start a session. More text.", "params": [
            {"name": "clientInfo", "required": False,
             "schema": {"anyOf": [{"$ref": "#/components/schemas/ClientInfo"}, {"type": "null"}],
                        "default": None}}],
         "x-direction": "clientToServer", "x-kind": "request",
         "result": {"name": "result", "schema": {"type": "object"}}},
        {"name": "ping", "summary": "Liveness check; answers {}.", "params": [],
         "x-direction": "clientToServer", "x-kind": "request",
         "result": {"name": "result", "schema": {"$ref": "#/components/schemas/Empty"}}},
        {"name": "debug/sleep", "summary": "Wait ms milliseconds.", "params": [
            {"name": "workDoneToken", "required": False,
             "schema": {"anyOf": [{"type": "integer"}, {"type": "string"}, {"type": "null"}],
                        "default": None}},
            {"name": "ms", "required": True, "schema": {"type": "integer"}}],
         "x-direction": "clientToServer", "x-kind": "request", "x-cancel": "interrupt",
         "result": {"name": "result", "schema": {"$ref": "#/components/schemas/SleepResult"}},
         "errors": [{"$ref": "#/components/errors/RequestCancelled"}]},
        {"name": "exit", "summary": "Exit the process.", "params": [],
         "x-direction": "clientToServer", "x-kind": "notification"},
        {"name": "$/cancelRequest", "summary": "Cancel a request by id.", "params": [
            {"name": "id", "required": True,
             "schema": {"anyOf": [{"type": "integer"}, {"type": "string"}]}}],
         "x-direction": "both", "x-kind": "notification"},
        {"name": "$/progress", "summary": "Progress.", "params": [],
         "x-direction": "serverToClient", "x-kind": "notification"},
    ],
    "components": {
        "schemas": {
            "ClientInfo": {"type": "object", "required": ["name"],
                           "properties": {"name": {"type": "string"},
                                          "version": {"type": "string"}}},
            "Empty": {"type": "object", "properties": {}},
            "SleepResult": {"type": "object", "required": ["sleptMs"],
                            "properties": {"sleptMs": {"type": "integer"}}},
        },
        "errors": {"RequestCancelled": {"code": -32800, "message": "RequestCancelled"},
                   "PermissionDenied": {"code": -32012, "message": "PermissionDenied"}},
    },
}


@pytest.fixture
def contract() -> Contract:
    return Contract.from_openrpc(DOC)

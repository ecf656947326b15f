"""The npm MCP servers the tests run, installed by scripts/test into tests/node/node_modules."""

from __future__ import annotations

from pathlib import Path

import pytest

NODE_BIN = Path(__file__).resolve().parent / "node" / "node_modules" / ".bin"


def npm_bin(name: str) -> str:
    path = NODE_BIN / name
    if not path.exists():
        pytest.fail(f"{name} is missing: run scripts/test, which runs `npm ci --prefix tests/node`")
    return str(path)

"""The MCP specification's own OAuth tests: npm's ``@modelcontextprotocol/conformance`` runs each auth
scenario's authorization and MCP servers and checks what the client did, and the client is the real
sidecar (``python -m sidecar``) driven as a UI drives it (scripts/conformance_client.py: add the
server, ``mcpServers/login`` when it asks, the browser played headlessly, a tool call).

Each scenario is one test, named after it; a failed one lists the suite's failed checks. Node >= 22
and the suite come from tests/conformance (``npm ci --prefix tests/conformance``, in scripts/test).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from tests.timing import scaled

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "tests" / "conformance" / "node_modules"
ADAPTER = ROOT / "scripts" / "conformance_client.py"

SCENARIOS = [
    "auth/metadata-default", "auth/metadata-var1", "auth/metadata-var2", "auth/metadata-var3",
    "auth/basic-cimd",
    "auth/scope-from-www-authenticate", "auth/scope-from-scopes-supported", "auth/scope-omitted-when-undefined",
    "auth/scope-step-up", "auth/scope-retry-limit",
    "auth/token-endpoint-auth-basic", "auth/token-endpoint-auth-post", "auth/token-endpoint-auth-none",
    "auth/pre-registration",
    "auth/2025-03-26-oauth-metadata-backcompat", "auth/2025-03-26-oauth-endpoint-fallback",
    "auth/resource-mismatch", "auth/offline-access-scope", "auth/offline-access-not-supported",
    "auth/client-credentials-jwt", "auth/client-credentials-basic",
    pytest.param("auth/cross-app-access-complete-flow", marks=pytest.mark.xfail(
        strict=True, reason="cross-app access (SEP-990: an enterprise IdP's token exchange, then a JWT "
                            "bearer grant) is not built")),
]


# How the suite's servers spell the tokens and secrets they hand out: none may reach the sidecar's
# log (it runs at debug level here) or what the adapter prints.
LEAKS = ("test-token", "cc-token-", "pre-registered-secret", "test-client-secret", "conformance-test-xaa-secret",
         "PRIVATE KEY")


def _suite() -> tuple[str, str]:
    node, cli = SUITE / ".bin" / "node", SUITE / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
    if not cli.exists():
        pytest.fail("the conformance suite is missing: run scripts/test, which runs "
                    "`npm ci --prefix tests/conformance`")
    if node.exists():
        return str(node), str(cli)
    # The registry's Node 22 packages are Linux-only (tests/conformance/package.json): elsewhere a
    # node >= 22 on PATH runs the suite.
    found = shutil.which("node")
    version = subprocess.run([found, "--version"], capture_output=True, text=True).stdout if found else ""
    if not found or int(version.lstrip("v").split(".")[0] or 0) < 22:
        pytest.skip(f"the conformance suite needs Node >= 22 (found {version.strip() or 'none'}); "
                    "npm installs one on Linux only")
    return found, str(cli)


def test_the_suite_lists_every_auth_scenario_tested_here() -> None:
    # A new release's new scenario is noticed here, not silently left out.
    node, cli = _suite()
    listed = subprocess.run([node, cli, "list"], capture_output=True, text=True, check=True).stdout
    names = {line.strip().removeprefix("- ").split(" ")[0] for line in listed.splitlines()
             if line.strip().startswith("- auth/")}
    tested = {s if isinstance(s, str) else s.values[0] for s in SCENARIOS}
    assert names == tested


@pytest.mark.parametrize("scenario", SCENARIOS)
async def test_conformance(scenario: str, tmp_path: Path) -> None:
    node, cli = _suite()
    command = f"{sys.executable} {ADAPTER}"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with anyio.fail_after(scaled(240)):
        done = await anyio.run_process(
            [node, cli, "client", "--command", command, "--scenario", scenario, "-o", str(tmp_path),
             "--timeout", str(int(scaled(90) * 1000))], check=False, env=env, cwd=tmp_path)
    found = list(tmp_path.rglob("checks.json"))
    assert found, f"{scenario}: the suite wrote no checks ({done.returncode}):\n{done.stdout.decode()[-3000:]}"
    checks = json.loads(found[0].read_text())
    failed = [f"{c['id']}: {c['status']}: {c.get('description', '')}" for c in checks
              if c["status"] not in ("SUCCESS", "INFO")]
    stderr = (found[0].parent / "stderr.txt").read_text(errors="replace")
    adapter = [line for line in stderr.splitlines() if line.startswith("[adapter]")]
    assert not failed and checks, f"{scenario}: " + "\n".join(failed + adapter)
    assert not [leak for leak in LEAKS if leak in stderr], f"{scenario}: a token or secret reached the log"

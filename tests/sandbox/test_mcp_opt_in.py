"""A stdio MCP server runs in the sandbox only when the user opted it in (option ``sandbox``)."""

from __future__ import annotations

import os

import pytest

from sidecar.mcp_host.config import sandbox_of
from sidecar.sandbox.policy import Confinement
from sidecar.sandbox.runner import Sandbox
from tests.mcp_host.test_host import FIXTURES, running, stdio, text, wait_status

pytestmark = pytest.mark.anyio


async def test_an_opted_in_server_sees_the_sandbox_and_the_others_run_as_before(bwrap: str) -> None:
    confined = stdio("boxed", cwd=str(FIXTURES), sandbox=Confinement(network="full"))
    plain = stdio("plain", cwd=str(FIXTURES))
    async with running(confined, plain, sandbox=Sandbox("bubblewrap")) as (host, _):
        await wait_status(host, "ts~boxed", "connected")
        await wait_status(host, "ts~plain", "connected")
        assert text(await host.call_tool("ts~boxed", "env", {"name": "HOME"})) == "/tmp/home"
        assert text(await host.call_tool("ts~plain", "env", {"name": "HOME"})) == os.environ["HOME"]
        assert text(await host.call_tool("ts~boxed", "echo", {"text": "still serving"})) == "still serving"


def test_the_option_turns_it_on_with_seed_004s_defaults() -> None:
    assert sandbox_of({}) is None
    assert sandbox_of({"sandboxed": False}) is None
    assert sandbox_of({"sandbox": {}}) == Confinement()  # no network: the defaults
    assert sandbox_of({"sandbox": {"writable": ["/srv/out"]}}) == Confinement(writable=("/srv/out",))
    assert sandbox_of({"sandbox": {"network": "full", "memory": 1 << 30}}) == Confinement(
        network="full", memory_bytes=1 << 30)


def test_a_row_of_the_older_option_keeps_the_network_it_had() -> None:
    assert sandbox_of({"sandboxed": True}) == Confinement(network="full")
    assert sandbox_of({"sandboxed": True, "sandbox": {}}) == Confinement()  # the block wins


def test_an_option_that_would_widen_past_the_checks_confines_to_the_defaults() -> None:
    # The same checks as a toolset's sandbox block: '/' writable or an unknown network mode
    # must not open the filesystem or the network (an unknown mode used to become 'full').
    for bad in ({"writable": ["/"]}, {"network": "bogus"}, {"writable": ["relative/dir"]}):
        assert sandbox_of({"sandbox": bad}) == Confinement(), bad

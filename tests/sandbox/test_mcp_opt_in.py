"""A stdio MCP server runs in the sandbox only when the user opted it in (option ``sandbox``)."""

from __future__ import annotations

import os

import pytest

from sidecar.api.mcp import ServerSandbox
from sidecar.mcp_host.config import sandbox_of
from sidecar.sandbox.policy import Confinement
from sidecar.sandbox.runner import Sandbox
from sidecar.store.mcp_servers import sandbox_option
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
    assert sandbox_of(sandbox_option({})) is None
    assert sandbox_of(sandbox_option({"sandboxed": False})) is None
    assert sandbox_of(sandbox_option({"sandbox": {}})) == Confinement()  # no network: the defaults
    assert sandbox_of(sandbox_option({"sandbox": {"writable": ["/srv/out"]}})) == Confinement(writable=("/srv/out",))
    assert sandbox_of(sandbox_option({"sandbox": {"network": "full", "memory": 1 << 30}})) == Confinement(
        network="full", memory_bytes=1 << 30)


def test_a_row_of_the_older_option_keeps_the_network_it_had() -> None:
    assert sandbox_of(sandbox_option({"sandboxed": True})) == Confinement(network="full")
    assert sandbox_of(sandbox_option({"sandboxed": True, "sandbox": {}})) == Confinement()  # the block wins


def test_an_option_that_would_widen_past_the_checks_confines_to_the_defaults() -> None:
    # The same checks as a toolset's sandbox block: '/' writable or an unknown network mode
    # must not open the filesystem or the network (an unknown mode used to become 'full').
    for bad in ({"writable": ["/"]}, {"network": "bogus"}, {"writable": ["relative/dir"]}, {"memory": [1]}):
        assert sandbox_of(sandbox_option({"sandbox": bad})) == Confinement(), bad
    assert sandbox_of(ServerSandbox(writable=["/"])) == Confinement()  # built in code, not read

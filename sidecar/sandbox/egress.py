"""The network a sandbox gets (``sandbox.network``), as bubblewrap arguments, environment and argv prefix.

- ``none``: a network namespace of its own with loopback only (``--unshare-net``).
- ``full``: the host's network, unchanged.
- ``allowedHosts``: a namespace of its own too, and a filtering proxy in the sidecar
  (sidecar/sandbox/egress_proxy.py) on a Unix socket made for this one sandbox, bound into it.
  sidecar/sandbox/bridge.py runs first in the sandbox, listens on 127.0.0.1:PORT there, carries
  each connection to that socket, and runs the tool with ``HTTP_PROXY``, ``HTTPS_PROXY``,
  ``ALL_PROXY`` (and their lower-case forms) pointing at it; urllib, httpx, requests, curl and pip
  honour them. A raw socket to anything else finds no route: the namespace has no other interface.

One socket per sandboxed process, not per Confinement: its lifetime is the process's (``close``
when it ends), the refusals are the process's own, for its call's error (``NetworkPlan.refusals``), and one
sandbox's connections count against its own bound. The proxy runs in the sidecar's event loop;
each connection holds at most two 64 KiB reads in flight and waits on the slower side, so a
tool pushing or pulling fast costs the loop no buffering, only its share of turns.

How the bubblewrap slice plugs it in (``egress`` built once in compose, ``bind(tg)`` there)::

    plan = await egress.prepare(confinement, label=f"toolset {toolset_id}")
    argv = ["bwrap", *filesystem_args, *plan.bwrap_args, "--", *plan.argv_prefix, *tool_argv]
    env = {**env, **plan.env}
    ...                                   # when the process has ended:
    plan.close()

``plan.bwrap_args`` go after the filesystem arguments: they bind the socket's folder, the bridge
and the interpreter that runs it at their own paths, over whatever tmpfs those arguments made.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import socket
import sys
import tempfile
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import anyio.abc

from ..net.lookup import Resolver, resolve_system
from .egress_proxy import Connection, Limits, Refused, Rules, answer, handle
from .policy import Confinement

log = logging.getLogger("sidecar.sandbox.egress")

PORT = 3128  # inside the sandbox's own namespace: nothing else can hold it there
BRIDGE = Path(__file__).with_name("bridge.py")
_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")


@dataclass(eq=False)
class NetworkPlan:
    """What a sandbox needs for its ``sandbox.network``: arguments, environment, a program to run first."""

    bwrap_args: tuple[str, ...]
    env: dict[str, str]
    argv_prefix: tuple[str, ...] = ()
    proxy_port: int | None = None  # prepare_loopback: the proxy's port on this machine's loopback
    refusals: deque[str] = field(default_factory=lambda: deque[str](maxlen=8))  # newest last
    _scope: anyio.CancelScope | None = None
    _folder: str | None = None

    def close(self) -> None:
        """Stop the proxy of this sandbox (its open tunnels too) and remove its socket. Idempotent."""
        if self._scope is not None:
            self._scope.cancel()
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None


class Egress:
    """The filtering proxies of the sandboxes whose network is ``allowedHosts``."""

    def __init__(self, *, resolver: Resolver | None = None, limits: Limits | None = None,
                 python: str | None = None) -> None:
        self._resolver = resolver or resolve_system
        self.limits = limits or Limits()
        self._python = python or os.path.realpath(sys.executable)
        base = sys.base_prefix  # the interpreter and standard library the bridge runs on
        self._python_args = ("--ro-bind", base, base) if os.path.isdir(base) else ()
        self._tg: anyio.abc.TaskGroup | None = None
        self._open: set[NetworkPlan] = set()
        self._connections = 0  # all sandboxes, against limits.connections
        self._lookups = anyio.CapacityLimiter(2)  # DNS lookups of all sandboxes at once

    def bind(self, tg: anyio.abc.TaskGroup) -> None:
        self._tg = tg

    async def prepare(self, confinement: Confinement, *, label: str = "tool") -> NetworkPlan:
        """The network part of one sandbox. Raises OSError when the proxy's socket cannot be made."""
        if confinement.network == "full":
            return NetworkPlan(bwrap_args=(), env={})
        if confinement.network == "none":
            return NetworkPlan(bwrap_args=("--unshare-net",), env={})
        folder = tempfile.mkdtemp(prefix="sidecar-egress-")  # 0700: no other user reaches the socket
        path = os.path.join(folder, "proxy.sock")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(path)
            listener.listen(self.limits.connections_per_sandbox)
            listener.setblocking(False)
        except BaseException:
            listener.close()
            shutil.rmtree(folder, ignore_errors=True)
            raise
        plan = NetworkPlan(
            bwrap_args=("--unshare-net", "--ro-bind", folder, folder, "--ro-bind", str(BRIDGE), str(BRIDGE),
                        *self._python_args),
            env=_proxy_env(PORT),
            argv_prefix=(self._python, "-I", "-S", str(BRIDGE), path, str(PORT), "--"),
            _scope=anyio.CancelScope(), _folder=folder)
        self._start(plan, listener, confinement, label)
        return plan

    async def prepare_loopback(self, confinement: Confinement, *, label: str = "tool") -> NetworkPlan:
        """For a sandbox without a network namespace of its own (macOS's Seatbelt, whose profile
        allows connecting to ``proxy_port`` alone, sidecar/sandbox/seatbelt.py): the proxy listens
        on a loopback TCP port, and the tool's environment points at it; no bridge.

        Any process of the user's could connect to that port, and reach through it only the hosts
        ``confinement`` allows; processes outside a sandbox reach those hosts anyway."""
        if confinement.network != "allowedHosts":
            return NetworkPlan(bwrap_args=(), env={})
        listener = socket.create_server(("127.0.0.1", 0), backlog=self.limits.connections_per_sandbox)
        listener.setblocking(False)
        port = listener.getsockname()[1]
        plan = NetworkPlan(bwrap_args=(), env=_proxy_env(port), proxy_port=port, _scope=anyio.CancelScope())
        self._start(plan, listener, confinement, label)
        return plan

    def _start(self, plan: NetworkPlan, listener: socket.socket, confinement: Confinement, label: str) -> None:
        if self._tg is None:
            listener.close()
            plan.close()
            raise RuntimeError("Egress.bind(tg) was not called: the proxy has no task group to run in")
        self._open.add(plan)
        rules = Rules(confinement.allowed_hosts, self._resolver, self._lookups)
        self._tg.start_soon(self._serve, plan, listener, rules, label)

    async def aclose(self) -> None:
        for plan in list(self._open):
            plan.close()

    async def _serve(self, plan: NetworkPlan, listener: socket.socket, rules: Rules, label: str) -> None:
        assert plan._scope is not None
        loop = asyncio.get_running_loop()
        try:
            with plan._scope, listener:
                async with anyio.create_task_group() as connections:
                    own = [0]
                    while True:
                        try:
                            client = Connection((await loop.sock_accept(listener))[0])
                        except OSError as exc:  # out of descriptors: the next accept may succeed
                            log.warning("%s: the network proxy cannot accept a connection: %s", label, exc)
                            await anyio.sleep(0.1)
                            continue
                        connections.start_soon(self._connection, client, rules, label, plan, own)
        except Exception:  # this task runs in the sidecar's own task group: nothing may escape it
            log.exception("%s: the network proxy stopped", label)
        finally:
            self._open.discard(plan)
            plan.close()

    async def _connection(self, client: Connection, rules: Rules, label: str, plan: NetworkPlan,
                          own: list[int]) -> None:
        limits = self.limits
        if own[0] >= limits.connections_per_sandbox or self._connections >= limits.connections:
            async with client:
                await answer(client, Refused(
                    503, "Too many connections through the sandbox's proxy",
                    f"the sandbox's proxy holds at most {limits.connections_per_sandbox} connections of one "
                    f"tool at a time ({limits.connections} in all); close some first"))
            return
        own[0] += 1
        self._connections += 1
        try:
            await handle(client, rules, limits, label, plan.refusals.append)
        except Exception:  # a bug here must end one connection, not the sidecar's task group
            log.exception("%s: a connection through the network proxy failed", label)
        finally:
            own[0] -= 1
            self._connections -= 1


def _proxy_env(port: int) -> dict[str, str]:
    return {**dict.fromkeys(_VARIABLES, f"http://127.0.0.1:{port}"), "NO_PROXY": "", "no_proxy": ""}

"""sandbox.network: allowedHosts, through a real network namespace (bwrap --unshare-net), the bridge
and the sidecar's filtering proxy, with real HTTP(S) servers on loopback addresses."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator, Sequence
from functools import cache
from pathlib import Path

import anyio
import pytest

from sidecar.sandbox.egress import Egress, NetworkPlan
from sidecar.sandbox.egress_proxy import Limits
from sidecar.sandbox.policy import Confinement
from tests.http_server import HttpServer, Response, echo
from tests.timing import scaled
from tests.toolsets.url_bundles import tls_for

pytestmark = pytest.mark.anyio

BWRAP = "/usr/bin/bwrap"
NAMES = {"api.test": "127.0.0.1", "localhost": "127.0.0.1"}  # what the sandbox's DNS says


@cache
def _bwrap_runs() -> bool:
    try:
        return subprocess.run([BWRAP, "--ro-bind", "/", "/", "--unshare-net", "--unshare-pid", "true"],
                              capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


needs_bwrap = pytest.mark.skipif(not _bwrap_runs(), reason="bwrap cannot create namespaces here")


async def _resolve(host: str, port: int) -> list[str]:
    if host not in NAMES:
        raise OSError(f"{host}: no such name in the test's resolver")
    return [NAMES[host]]


@pytest.fixture
async def egress() -> AsyncIterator[Egress]:
    async with anyio.create_task_group() as tg:
        proxies = Egress(resolver=_resolve)
        proxies.bind(tg)
        yield proxies
        await proxies.aclose()
        tg.cancel_scope.cancel()


@pytest.fixture
def server() -> Iterator[HttpServer]:
    with HttpServer("127.0.0.1") as running:
        running.route("*", "/echo", handler=echo)
        running.route("GET", "/hello", Response(body=b"hello from the allowed host"))
        yield running


# The interpreter again above the fresh /tmp: a checkout under /tmp (CI's clone) has its venv there.
PYTHON = sorted({sys.prefix, sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable))})


def allowed(*hosts: str) -> Confinement:
    return Confinement(network="allowedHosts", allowed_hosts=hosts)


async def run_tool(plan: NetworkPlan, code: str, *args: str, env: dict[str, str] | None = None,
                   stdin: bytes = b"", binds: Sequence[str] = ()) -> subprocess.CompletedProcess[bytes]:
    """``code`` as a Python program in a sandbox with ``plan``'s network (the rest of the
    filesystem read-only: the network is what is under test here)."""
    argv = [BWRAP, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
            "--unshare-pid", "--die-with-parent", "--new-session",
            *(arg for path in (*PYTHON, *binds) for arg in ("--ro-bind", path, path)), *plan.bwrap_args, "--",
            *plan.argv_prefix, sys.executable, "-c", code, *args]
    with anyio.fail_after(scaled(30)):
        return await anyio.run_process(argv, input=stdin, env={**os.environ, **plan.env, **(env or {})},
                                       check=False)


URLLIB = """
import json, sys, urllib.request, urllib.error
out = {}
for url in sys.argv[1:]:
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            out[url] = {"status": answer.status, "body": answer.read().decode()}
    except urllib.error.HTTPError as exc:
        out[url] = {"status": exc.code, "reason": exc.reason, "body": exc.read().decode()}
    except OSError as exc:
        out[url] = {"error": str(exc.reason if isinstance(exc, urllib.error.URLError) else exc)}
print(json.dumps(out))
"""


def outcomes(result: subprocess.CompletedProcess[bytes]) -> dict[str, dict[str, object]]:
    assert result.returncode == 0, result.stderr.decode()
    return json.loads(result.stdout)


@needs_bwrap
async def test_a_urllib_tool_reaches_the_listed_host_and_is_refused_others_by_name(
        egress: Egress, server: HttpServer) -> None:
    other = HttpServer("127.0.0.2").start()
    other.route("GET", "/hello", Response(body=b"should never be reached"))
    try:
        plan = await egress.prepare(allowed(f"127.0.0.1:{server.port}"))
        result = await run_tool(plan, URLLIB, f"{server.url}/hello", f"{other.url}/hello")
        got = outcomes(result)
        assert got[f"{server.url}/hello"] == {"status": 200, "body": "hello from the allowed host"}
        refused = got[f"{other.url}/hello"]
        assert refused["status"] == 403
        assert f"127.0.0.2:{other.port} is not in sandbox.allowedHosts" in str(refused["reason"])
        assert f"add '127.0.0.2:{other.port}' to sandbox.allowedHosts" in str(refused["body"])
        assert other.connections == 0
    finally:
        other.close()
    assert any("127.0.0.2:" in line for line in plan.refusals)


@needs_bwrap
async def test_https_goes_through_a_tunnel_with_the_name_kept_for_tls(egress: Egress, tmp_path: Path) -> None:
    server_tls, _ = tls_for("api.test", tmp_path / "tls")
    with HttpServer("127.0.0.1", tls=server_tls) as tls_server:
        tls_server.route("GET", "/v1", Response(json={"ok": True}))
        plan = await egress.prepare(allowed("api.test", f"127.0.0.1:{tls_server.port}"))
        url = f"https://api.test:{tls_server.port}/v1"
        code = ("import httpx2, sys\n"
                "print(httpx2.get(sys.argv[1], verify=sys.argv[2], timeout=10).json())")
        result = await run_tool(plan, code, url, str(tmp_path / "tls" / "ca.pem"), binds=[str(tmp_path)])
        assert result.returncode == 0, result.stderr.decode()
        assert result.stdout.decode().strip() == "{'ok': True}"
        assert tls_server.server_names == ["api.test"]

        refused = await run_tool(plan, URLLIB, "https://example.org/")
    error = str(outcomes(refused)["https://example.org/"]["error"])
    assert "Tunnel connection failed: 403" in error
    assert "example.org:443 is not in sandbox.allowedHosts" in error


@needs_bwrap
async def test_a_listed_name_that_resolves_to_a_local_address_needs_that_address_listed(
        egress: Egress, server: HttpServer) -> None:
    plan = await egress.prepare(allowed(f"api.test:{server.port}"))
    url = f"http://api.test:{server.port}/hello"
    got = outcomes(await run_tool(plan, URLLIB, url))[url]
    assert got["status"] == 403
    assert "it resolved to 127.0.0.1, a loopback address" in str(got["body"])
    assert "add '127.0.0.1' to sandbox.allowedHosts" in str(got["body"])
    assert server.requests == []

    plan = await egress.prepare(allowed(f"api.test:{server.port}", "127.0.0.1"))
    got = outcomes(await run_tool(plan, URLLIB, url))[url]
    assert got == {"status": 200, "body": "hello from the allowed host"}


@needs_bwrap
async def test_localhost_listed_as_such_reaches_this_machine(egress: Egress, server: HttpServer) -> None:
    plan = await egress.prepare(allowed(f"localhost:{server.port}"))
    url = f"http://localhost:{server.port}/hello"
    assert outcomes(await run_tool(plan, URLLIB, url))[url]["status"] == 200


@needs_bwrap
async def test_plain_http_reaches_the_origin_in_origin_form_without_proxy_headers(
        egress: Egress, server: HttpServer) -> None:
    plan = await egress.prepare(allowed(f"127.0.0.1:{server.port}"))
    url = f"{server.url}/echo?q=1"
    got = outcomes(await run_tool(plan, URLLIB, url))[url]
    seen = json.loads(str(got["body"]))
    assert seen["target"] == "/echo?q=1"
    names = {name.lower() for name, _ in seen["headers"]}
    assert "host" in names and not names & {"proxy-connection", "proxy-authorization"}


RAW = """
import json, socket, sys
out = {}
for host, port in (("127.0.0.1", int(sys.argv[1])), ("1.1.1.1", 443), ("example.org", 80)):
    try:
        socket.create_connection((host, port), timeout=5).close()
        out[host] = "connected"
    except OSError as exc:
        out[host] = type(exc).__name__
print(json.dumps(out))
"""


@needs_bwrap
async def test_a_raw_socket_reaches_nothing(egress: Egress, server: HttpServer) -> None:
    plan = await egress.prepare(allowed(f"127.0.0.1:{server.port}", "example.org"))
    result = await run_tool(plan, RAW, str(server.port))
    assert result.returncode == 0, result.stderr.decode()
    got = json.loads(result.stdout)
    assert "connected" not in got.values(), got  # loopback is the sandbox's own; no route elsewhere
    assert server.connections == 0


BYPASS = """
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(b"CONNECT 127.0.0.2:80 HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n")
print(s.recv(4096).decode().splitlines()[0])
"""


@needs_bwrap
async def test_the_proxy_socket_used_directly_obeys_the_same_rules(egress: Egress, server: HttpServer) -> None:
    plan = await egress.prepare(allowed(f"127.0.0.1:{server.port}"))
    socket_path = plan.argv_prefix[-3]
    result = await run_tool(plan, BYPASS, socket_path)
    assert result.returncode == 0, result.stderr.decode()
    assert result.stdout.decode().startswith("HTTP/1.1 403 Forbidden by the sandbox: 127.0.0.2:80")


KILL_BRIDGE = """
import os, signal, time, urllib.request, sys
os.kill(os.getppid(), signal.SIGKILL)
time.sleep(30)
print("the tool outlived its bridge")
"""


@needs_bwrap
async def test_killing_the_bridge_ends_the_sandbox_and_leaves_the_proxy_serving_others(
        egress: Egress, server: HttpServer) -> None:
    plan = await egress.prepare(allowed(f"127.0.0.1:{server.port}"))
    with anyio.fail_after(scaled(20)):
        result = await run_tool(plan, KILL_BRIDGE)
    assert b"outlived" not in result.stdout
    assert result.returncode != 0

    other = await egress.prepare(allowed(f"127.0.0.1:{server.port}"))
    url = f"{server.url}/hello"
    assert outcomes(await run_tool(other, URLLIB, url))[url]["status"] == 200


@needs_bwrap
async def test_the_tool_keeps_its_stdio_exit_code_and_signals(egress: Egress) -> None:
    plan = await egress.prepare(allowed("api.test"))
    code = "import sys, os; sys.stdout.write(sys.stdin.read().upper()); sys.stdout.flush(); os._exit(7)"
    result = await run_tool(plan, code, stdin=b"through the bridge")
    assert (result.returncode, result.stdout) == (7, b"THROUGH THE BRIDGE")
    assert os.environ.get("HTTP_PROXY") != plan.env["HTTP_PROXY"]
    env = await run_tool(plan, "import os, json; print(json.dumps({k: os.environ[k] for k in "
                         "('HTTPS_PROXY', 'http_proxy', 'ALL_PROXY', 'NO_PROXY')}))")
    assert json.loads(env.stdout) == {"HTTPS_PROXY": "http://127.0.0.1:3128", "http_proxy": "http://127.0.0.1:3128",
                                      "ALL_PROXY": "http://127.0.0.1:3128", "NO_PROXY": ""}
    killed = await run_tool(plan, "import os, signal; os.kill(os.getpid(), signal.SIGTERM)")
    assert killed.returncode in (-signal.SIGTERM, 128 + signal.SIGTERM)


async def test_no_network_and_full_network_need_no_proxy(egress: Egress) -> None:
    none = await egress.prepare(Confinement())
    assert (none.bwrap_args, none.env, none.argv_prefix) == (("--unshare-net",), {}, ())
    full = await egress.prepare(Confinement(network="full"))
    assert (full.bwrap_args, full.env, full.argv_prefix) == ((), {}, ())


# -- the proxy alone, over its Unix socket (no namespace needed) ------------------------------------


async def _ask(plan: NetworkPlan, request: bytes, *, read: bool = True) -> bytes:
    socket_path = plan.argv_prefix[-3]
    async with await anyio.connect_unix(socket_path) as stream:
        await stream.send(request)
        if not read:
            return b""
        answer = b""
        with anyio.fail_after(scaled(10)):
            try:
                while True:
                    answer += await stream.receive()
            except anyio.EndOfStream:
                pass
        return answer


async def test_malformed_and_origin_form_requests_get_400(egress: Egress) -> None:
    plan = await egress.prepare(allowed("api.test"))
    for request in (b"GET /hello HTTP/1.1\r\nHost: api.test\r\n\r\n", b"hello\r\n\r\n",
                    b"CONNECT api.test HTTP/1.1\r\n\r\n", b"CONNECT user@api.test:443 HTTP/1.1\r\n\r\n",
                    b"GET https://api.test/ HTTP/1.1\r\n\r\n", b"CONNECT api.test:0 HTTP/1.1\r\n\r\n",
                    b"CONNECT a\x01b:443 HTTP/1.1\r\n\r\n"):
        answer = await _ask(plan, request)
        assert answer.startswith(b"HTTP/1.1 400 "), (request, answer)


async def test_a_refused_upload_still_gets_its_403(egress: Egress) -> None:
    """The proxy reads what the client keeps sending after a refusal: closing on unread bytes
    would reset the connection, and the client could lose the answer."""
    plan = await egress.prepare(allowed("api.test"))
    body = b"b" * (512 << 10)
    request = b"POST http://example.org/upload HTTP/1.1\r\nContent-Length: %d\r\n\r\n" % len(body) + body
    answer = await _ask(plan, request)
    assert answer.startswith(b"HTTP/1.1 403 Forbidden by the sandbox: example.org:80")


async def test_a_metadata_address_is_refused_even_when_its_name_is_listed(egress: Egress) -> None:
    NAMES["metadata.test"] = "169.254.169.254"
    plan = await egress.prepare(allowed("metadata.test"))
    answer = await _ask(plan, b"CONNECT metadata.test:80 HTTP/1.1\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 403 ")
    assert b"cloud metadata address" in answer and b"add '169.254.169.254'" in answer


async def test_a_head_too_large_or_too_slow_is_answered_and_closed() -> None:
    async with anyio.create_task_group() as tg:
        egress = Egress(resolver=_resolve, limits=Limits(head_timeout=0.5, head_bytes=1024))
        egress.bind(tg)
        plan = await egress.prepare(allowed("api.test"))
        assert (await _ask(plan, b"CONNECT api.test:443 HTTP/1.1\r\n" + b"X: y\r\n" * 400)).startswith(
            b"HTTP/1.1 431 ")
        assert (await _ask(plan, b"CONNECT api.test:443 HTTP/1.1\r\n")).startswith(b"HTTP/1.1 408 ")
        tg.cancel_scope.cancel()


async def test_one_sandbox_holds_a_bounded_number_of_connections(server: HttpServer) -> None:
    async with anyio.create_task_group() as tg:
        egress = Egress(resolver=_resolve, limits=Limits(connections_per_sandbox=3))
        egress.bind(tg)
        plan = await egress.prepare(allowed(f"127.0.0.1:{server.port}"))
        socket_path = plan.argv_prefix[-3]
        held = [await anyio.connect_unix(socket_path) for _ in range(3)]
        for stream in held:  # tunnels that stay open
            await stream.send(f"CONNECT 127.0.0.1:{server.port} HTTP/1.1\r\n\r\n".encode())
            assert (await stream.receive()).startswith(b"HTTP/1.1 200 ")
        answer = await _ask(plan, f"CONNECT 127.0.0.1:{server.port} HTTP/1.1\r\n\r\n".encode())
        assert answer.startswith(b"HTTP/1.1 503 ") and b"at most 3 connections" in answer
        await held[0].aclose()
        await anyio.sleep(0.2)  # the proxy notices the close
        answer = await _ask(plan, f"GET {server.url}/hello HTTP/1.1\r\n\r\n".encode())
        assert answer.startswith(b"HTTP/1.1 200 ")
        for stream in held[1:]:
            await stream.aclose()
        tg.cancel_scope.cancel()


async def test_an_idle_tunnel_is_closed(server: HttpServer) -> None:
    async with anyio.create_task_group() as tg:
        egress = Egress(resolver=_resolve, limits=Limits(idle_timeout=0.5))
        egress.bind(tg)
        plan = await egress.prepare(allowed(f"127.0.0.1:{server.port}"))
        async with await anyio.connect_unix(plan.argv_prefix[-3]) as stream:
            await stream.send(f"CONNECT 127.0.0.1:{server.port} HTTP/1.1\r\n\r\n".encode())
            assert (await stream.receive()).startswith(b"HTTP/1.1 200 ")
            with anyio.fail_after(scaled(10)), pytest.raises(anyio.EndOfStream):
                await stream.receive()
        tg.cancel_scope.cancel()


class Flood:
    """A server that answers any request with ``total`` bytes as fast as it may, counting what the
    kernel took from it."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.sent = 0
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.port = self._sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        conn, _ = self._sock.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % self.total)
            block = b"x" * (1 << 20)
            try:
                while self.sent < self.total:
                    self.sent += conn.send(block)
            except OSError:
                pass

    def close(self) -> None:
        self._sock.close()


async def test_a_client_that_does_not_read_holds_the_upstream_back() -> None:
    """Backpressure: the proxy does not buffer a download the tool is not reading."""
    flood = Flood(256 << 20)
    async with anyio.create_task_group() as tg:
        egress = Egress(resolver=_resolve)
        egress.bind(tg)
        plan = await egress.prepare(allowed(f"127.0.0.1:{flood.port}"))
        async with await anyio.connect_unix(plan.argv_prefix[-3]) as stream:
            await stream.send(f"GET http://127.0.0.1:{flood.port}/big HTTP/1.1\r\n\r\n".encode())
            received = len(await stream.receive())
            await anyio.sleep(1.0)  # long enough for the whole body to cross loopback if nothing held it
            assert flood.sent < 64 << 20  # what socket buffers hold, not the 256 MiB offered
            with anyio.fail_after(scaled(60)):
                while received < flood.total:
                    received += len(await stream.receive(1 << 20))
        tg.cancel_scope.cancel()
    flood.close()
    assert flood.sent == flood.total


async def test_close_removes_the_socket_and_stops_serving(egress: Egress) -> None:
    plan = await egress.prepare(allowed("api.test"))
    socket_path = Path(plan.argv_prefix[-3])
    assert await anyio.Path(socket_path).exists()
    assert ((await anyio.Path(socket_path.parent).stat()).st_mode & 0o077) == 0  # no other user reaches it
    plan.close()
    await anyio.sleep(0.05)
    assert not await anyio.Path(socket_path.parent).exists()
    with pytest.raises(OSError):
        await anyio.connect_unix(str(socket_path))


def test_the_bridge_imports_only_the_standard_library() -> None:
    source = (Path(__file__).parents[2] / "sidecar" / "sandbox" / "bridge.py").read_text()
    imports: Sequence[str] = [line.split()[1] for line in source.splitlines() if line.startswith(("import ", "from "))]
    assert set(imports) <= {"__future__", "_signal", "_socket", "os", "select", "sys"}


async def test_the_bridge_holds_none_of_the_tools_pipes(egress: Egress) -> None:
    """A worker's protocol runs on its stdout (and on pipes it inherits): when the tool closes
    them, the sidecar must see EOF while the tool lives on, not when the bridge exits. (Run
    without bwrap, whose own process keeps a copy of stdout: the bridge alone is under test.)"""
    plan = await egress.prepare(allowed("api.test"))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    prefix = [*plan.argv_prefix[:-2], str(port), "--"]
    read_end, write_end = os.pipe()
    code = ("import os, sys, time; sys.stdout.write('bye'); sys.stdout.flush(); os.close(1); "
            f"os.close({write_end}); time.sleep(20)")
    process = await anyio.open_process([*prefix, sys.executable, "-c", code], pass_fds=(write_end,))
    os.close(write_end)
    async with process:
        try:
            assert process.stdout is not None
            with anyio.fail_after(scaled(15)):
                assert await process.stdout.receive() == b"bye"
                with pytest.raises(anyio.EndOfStream):
                    await process.stdout.receive()
                await anyio.wait_readable(read_end)
                assert os.read(read_end, 1) == b""
            assert process.returncode is None  # EOF came from the tool, which still sleeps
        finally:
            process.kill()
            os.close(read_end)


async def test_the_loopback_proxy_for_macos_applies_the_same_rules(egress: Egress, server: HttpServer) -> None:
    """macOS has no network namespace: the proxy listens on a loopback port the profile allows."""
    plan = await egress.prepare_loopback(allowed(f"127.0.0.1:{server.port}"))
    assert plan.proxy_port is not None and plan.argv_prefix == () and plan.bwrap_args == ()
    assert plan.env["HTTPS_PROXY"] == f"http://127.0.0.1:{plan.proxy_port}"
    async with await anyio.connect_tcp("127.0.0.1", plan.proxy_port) as stream:
        await stream.send(f"GET {server.url}/hello HTTP/1.1\r\n\r\n".encode())
        answer = b""
        with anyio.fail_after(scaled(10)):
            try:
                while True:
                    answer += await stream.receive()
            except anyio.EndOfStream:
                pass
    assert answer.startswith(b"HTTP/1.1 200 ") and answer.endswith(b"hello from the allowed host")
    async with await anyio.connect_tcp("127.0.0.1", plan.proxy_port) as stream:
        await stream.send(b"CONNECT example.org:443 HTTP/1.1\r\n\r\n")
        with anyio.fail_after(scaled(10)):
            assert (await stream.receive()).startswith(b"HTTP/1.1 403 Forbidden by the sandbox: example.org:443")
    plan.close()
    assert (await egress.prepare_loopback(Confinement())).proxy_port is None


MANY = """
import hashlib, json, socket, sys, urllib.request
port = int(sys.argv[1])
tunnels = []
for _ in range(10):
    s = socket.create_connection(("127.0.0.1", 3128))
    s.sendall(f"CONNECT 127.0.0.1:{port} HTTP/1.1\\r\\n\\r\\n".encode())
    assert s.recv(100).startswith(b"HTTP/1.1 200")
    tunnels.append(s)
threads = [l for l in open(f"/proc/{__import__('os').getppid()}/status") if l.startswith("Threads:")][0].split()[1]
big = urllib.request.urlopen(f"http://127.0.0.1:{port}/big", timeout=30).read()
body = b"u" * (8 << 20)
echoed = urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{port}/echo", data=body), timeout=30).read()
print(json.dumps({"threads": int(threads), "big": len(big), "sha": hashlib.sha256(big).hexdigest(),
                  "echoed": len(json.loads(echoed)["body"])}))
"""


@needs_bwrap
async def test_the_bridge_carries_many_connections_and_large_bodies_on_one_thread(
        egress: Egress, server: HttpServer) -> None:
    """A pids cgroup counts threads: the bridge must not spend the tool's process budget."""
    payload = bytes(range(256)) * (64 << 10)  # 16 MiB
    server.route("GET", "/big", Response(body=payload))
    plan = await egress.prepare(allowed(f"127.0.0.1:{server.port}"))
    result = await run_tool(plan, MANY, str(server.port))
    assert result.returncode == 0, result.stderr.decode()
    got = json.loads(result.stdout)
    assert got["threads"] == 1
    assert (got["big"], got["sha"]) == (len(payload), hashlib.sha256(payload).hexdigest())
    assert got["echoed"] == 8 << 20

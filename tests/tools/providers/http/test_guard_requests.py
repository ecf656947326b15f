"""Where an HTTP tool's request may go, through the real httpx2 client with the guard's transport,
against real servers (tests/http_server.py) on loopback addresses (127.0.0.1, 127.0.0.2, 127.0.0.3, ::1).

A DNS name is resolved by an injected resolver (real DNS of a made-up name would need the internet);
everything else is real: sockets, redirects, TLS. 127.0.0.2 stands for "a public server" and is
listed in allowedHosts, which is the one explicit way to reach a loopback or private address.
"""

from __future__ import annotations

import datetime
import ipaddress
import logging
import ssl
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from sidecar.errors import DestinationRefused
from sidecar.tools.providers.http.guard import Destinations
from tests.http_server import HttpServer, Request, Response

pytestmark = pytest.mark.anyio


PATHS = ("/", "/admin", "/file", "/one", "/two", "/three", "/secure", "/steal")


def _redirect(request: Request) -> Response:
    return Response(302, headers={"Location": request.raw_query})


class Server:
    """A tests/http_server.py server that says which address it is and redirects ``/go?<url>``."""

    def __init__(self, host: str, port: int = 0, tls: ssl.SSLContext | None = None) -> None:
        self.http = HttpServer(host, port, tls)
        self.host, self.port = host, self.http.port
        self.http.route("GET", "/go", handler=_redirect)
        for path in PATHS:
            self.http.route("GET", path, Response(body=f"hello from {host}"))

    @property
    def requests(self) -> list[tuple[str, str]]:
        """(target, Host header) of each request received."""
        return [(r.target, r.header("host") or "") for r in self.http.requests]

    @property
    def server_names(self) -> list[str | None]:
        return self.http.server_names

    def url(self, path: str = "/", host: str | None = None, scheme: str = "http") -> str:
        return f"{scheme}://{host or self.http.netloc.rsplit(':', 1)[0]}:{self.port}{path}"


@pytest.fixture
def serve() -> Iterator[Callable[..., Server]]:
    """Start a real server on a given local address; all stop after the test."""
    running: list[Server] = []

    def start(host: str, tls: ssl.SSLContext | None = None, port: int = 0) -> Server:
        server = Server(host, port, tls)
        server.http.start()
        running.append(server)
        return server

    yield start
    for server in running:
        server.http.close()


class Resolver:
    """A DNS stand-in that records what it was asked and answers from a table (a list of answers
    for one name is served in turn, the last one repeating)."""

    def __init__(self, table: dict[str, list[list[str]]]) -> None:
        self.table = table
        self.asked: list[str] = []

    async def __call__(self, host: str, port: int) -> list[str]:
        self.asked.append(host)
        answers = self.table[host]
        return answers.pop(0) if len(answers) > 1 else answers[0]


def client(guard: Destinations, **kwargs: Any) -> httpx2.AsyncClient:
    verify = kwargs.pop("verify", True)
    return httpx2.AsyncClient(transport=guard.transport(verify=verify), timeout=5, **kwargs)


@pytest.fixture
def connects(caplog: pytest.LogCaptureFixture) -> Callable[[], list[str]]:
    """The guard's own record of every connection it opened (its debug log), as 'host -> address'."""
    caplog.set_level(logging.DEBUG, logger="sidecar.tools.http")

    def seen() -> list[str]:
        return [f"{r.args[0]} -> {r.args[2]}" for r in caplog.records  # type: ignore[index] -- (host, port, address)
                if r.name == "sidecar.tools.http" and r.msg.startswith("http: connecting")]
    return seen


async def test_a_local_server_is_reached_only_through_an_entry_that_lists_its_address(serve, connects) -> None:
    local = serve("127.0.0.1")
    dns = Resolver({"api.test": [["127.0.0.1"]]})
    async with client(Destinations(["api.test"], resolver=dns)) as http:
        with pytest.raises(DestinationRefused) as caught:
            await http.get(local.url(host="api.test"))
        with pytest.raises(DestinationRefused):
            await http.get(local.url())
    assert caught.value.message == (
        f"refused api.test:{local.port}: api.test resolved to 127.0.0.1, a loopback address (127.0.0.0/8); "
        "to allow that address, add '127.0.0.1' to allowedHosts")
    assert local.requests == [] and connects() == []

    async with client(Destinations(["api.test", "127.0.0.1"], resolver=dns)) as http:
        assert (await http.get(local.url(host="api.test"))).text == "hello from 127.0.0.1"
        assert (await http.get(local.url())).status_code == 200
    assert local.requests == [("/", f"api.test:{local.port}"), ("/", f"127.0.0.1:{local.port}")]


async def test_a_redirect_to_loopback_is_refused_and_never_reaches_it(serve, connects) -> None:
    public, local = serve("127.0.0.2"), serve("127.0.0.1")
    dns = Resolver({"api.test": [["127.0.0.2"]], "login.test": [["127.0.0.1"]]})
    guard = Destinations(["api.test", "login.test", "127.0.0.2"], resolver=dns)
    async with client(guard, follow_redirects=True) as http:
        for target in (local.url("/admin"), local.url("/admin", host="login.test")):
            with pytest.raises(DestinationRefused) as caught:
                await http.get(public.url(f"/go?{target}", host="api.test"))
            assert "127.0.0.1" in caught.value.message and "allowedHosts" in caught.value.message
    assert caught.value.reason == "loopback"
    assert [path for path, _ in public.requests] == [f"/go?{local.url('/admin')}",
                                                      f"/go?{local.url('/admin', host='login.test')}"]
    assert local.requests == []
    assert connects() == ["api.test -> 127.0.0.2"]  # one pooled connection; none to 127.0.0.1


async def test_a_redirect_to_the_metadata_address_is_refused_before_any_connection(serve, connects) -> None:
    public = serve("127.0.0.2")
    dns = Resolver({"api.test": [["127.0.0.2"]]})
    # Even a network entry that contains it does not open the metadata address.
    for entries in (["api.test", "127.0.0.2"], ["api.test", "127.0.0.2", "169.254.0.0/16"]):
        async with client(Destinations(entries, resolver=dns), follow_redirects=True) as http:
            for target in ("http://169.254.169.254/latest/meta-data/iam/security-credentials/",
                           "http://[::ffff:169.254.169.254]/latest/meta-data/", "http://[fd00:ec2::254]/"):
                with pytest.raises(DestinationRefused) as caught:
                    await http.get(public.url(f"/go?{target}", host="api.test"))
                assert "169.254.169.254" in caught.value.message or "fd00:ec2::254" in caught.value.message
    assert caught.value.allow == "fd00:ec2::254"
    assert dns.asked == ["api.test", "api.test"]  # a literal is never looked up
    assert connects() == ["api.test -> 127.0.0.2", "api.test -> 127.0.0.2"]


async def test_a_redirect_to_a_host_not_allowed_is_refused_without_looking_it_up(serve, connects) -> None:
    public = serve("127.0.0.2")
    dns = Resolver({"api.test": [["127.0.0.2"]], "evil.test": [["127.0.0.2"]]})
    async with client(Destinations(["api.test", "127.0.0.2"], resolver=dns), follow_redirects=True) as http:
        with pytest.raises(DestinationRefused) as caught:
            await http.get(public.url(f"/go?{public.url('/steal', host='evil.test')}", host="api.test"))
    assert caught.value.message.startswith(f"refused evil.test:{public.port}: host 'evil.test' is not in allowedHosts")
    assert "not looked up" in caught.value.message and caught.value.allow == "evil.test"
    assert dns.asked == ["api.test"]
    assert [path for path, _ in public.requests] == [f"/go?{public.url('/steal', host='evil.test')}"]


async def test_an_allowed_redirect_is_followed_through_the_same_checks(serve, connects) -> None:
    public, other = serve("127.0.0.2"), serve("127.0.0.3")
    dns = Resolver({"api.test": [["127.0.0.2"]], "cdn.test": [["127.0.0.3"]]})
    guard = Destinations(["api.test", "cdn.test", "127.0.0.2", "127.0.0.3"], resolver=dns)
    async with client(guard, follow_redirects=True) as http:
        response = await http.get(public.url(f"/go?{other.url('/file', host='cdn.test')}", host="api.test"))
    assert response.text == "hello from 127.0.0.3"
    assert other.requests == [("/file", f"cdn.test:{other.port}")]
    assert connects() == ["api.test -> 127.0.0.2", "cdn.test -> 127.0.0.3"]


async def test_a_name_resolving_to_private_addresses_is_refused(serve, connects) -> None:
    dns = Resolver({"intranet.test": [["10.20.30.40"]], "mixed.test": [["93.184.216.34", "192.168.1.20"]],
                    "v6.test": [["::1"]]})
    async with client(Destinations(["intranet.test", "mixed.test", "v6.test"], resolver=dns)) as http:
        for host, address, kind in (("intranet.test", "10.20.30.40", "private"),
                                    ("mixed.test", "192.168.1.20", "private"), ("v6.test", "::1", "loopback")):
            with pytest.raises(DestinationRefused) as caught:
                await http.get(f"http://{host}/")
            assert (caught.value.host, caught.value.address, caught.value.reason) == (host, address, kind)
            assert f"add '{address}' to allowedHosts" in caught.value.message
            if host == "mixed.test":
                assert "resolved to 2 addresses, among them 192.168.1.20" in caught.value.message
    assert connects() == []


async def test_the_connection_goes_to_the_checked_address_not_to_a_rebound_answer(serve, connects) -> None:
    # The attacker's DNS answers the allowed address first, then loopback 127.0.0.3, where a server
    # listens on the same port: a second lookup at connect time would land there.
    checked = serve("127.0.0.2")
    rebound = serve("127.0.0.3", port=checked.port)
    dns = Resolver({"rebind.test": [["127.0.0.2"], ["127.0.0.3"]]})
    guard = Destinations(["rebind.test", "127.0.0.2"], resolver=dns)
    async with client(guard) as http:
        first = await http.get(checked.url("/one", host="rebind.test"))
        second = await http.get(checked.url("/two", host="rebind.test"))  # the pooled, checked connection
    assert (first.text, second.text) == ("hello from 127.0.0.2", "hello from 127.0.0.2")
    assert dns.asked == ["rebind.test"]
    assert [path for path, _ in checked.requests] == ["/one", "/two"]
    # A new connection asks again, and the new answer is checked like the first.
    async with client(guard) as http:
        with pytest.raises(DestinationRefused) as caught:
            await http.get(checked.url("/three", host="rebind.test"))
    assert (caught.value.address, caught.value.reason) == ("127.0.0.3", "loopback")
    assert rebound.requests == []
    assert connects() == ["rebind.test -> 127.0.0.2"]


async def test_userinfo_that_looks_like_an_allowed_host_does_not_change_the_host(serve, connects) -> None:
    local = serve("127.0.0.1")
    async with client(Destinations(["allowed.example"], resolver=Resolver({}))) as http:
        with pytest.raises(DestinationRefused) as caught:
            await http.get(f"http://allowed.example@127.0.0.1:{local.port}/")
    assert caught.value.host == "127.0.0.1" and "must be listed as itself" in caught.value.message
    assert local.requests == [] and connects() == []


async def test_idna_uppercase_and_trailing_dot_spellings_reach_the_listed_host(serve, connects) -> None:
    public = serve("127.0.0.2")
    dns = Resolver({"xn--bcher-kva.test.": [["127.0.0.2"]], "api.test": [["127.0.0.2"]]})
    guard = Destinations(["Bücher.test", "API.test.", "127.0.0.2"], resolver=dns)
    async with client(guard) as http:
        assert (await http.get(f"http://BÜCHER.test.:{public.port}/")).status_code == 200
        assert (await http.get(f"http://Api.Test:{public.port}/")).status_code == 200
        with pytest.raises(DestinationRefused):
            await http.get(f"http://bucher.test:{public.port}/")
    assert public.requests == [("/", f"xn--bcher-kva.test.:{public.port}"), ("/", f"api.test:{public.port}")]


async def test_ipv6_literals_follow_the_same_rules(serve, connects) -> None:
    local = serve("::1")
    async with client(Destinations(["[::1]"], resolver=Resolver({}))) as http:
        assert (await http.get(local.url())).text == "hello from ::1"
    async with client(Destinations(["localhost"], resolver=Resolver({"localhost": [["::1"]]}))) as http:
        with pytest.raises(DestinationRefused) as caught:
            await http.get(local.url(host="localhost"))
    assert caught.value.message == (
        f"refused localhost:{local.port}: localhost resolved to ::1, a loopback address (::1/128); "
        "to allow that address, add '::1' to allowedHosts")
    assert len(local.requests) == 1


def _tls(tmp_path: Path, name: str) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """A CA, a certificate for ``name`` signed by it, the server's context and a client context
    that trusts only that CA."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "guard test CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(1).not_valid_before(now - datetime.timedelta(days=1))
          .not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))
    leaf = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(2)
            .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    cert_file, key_file = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_file.write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(cert_file, key_file)
    trusting = ssl.create_default_context(cadata=ca.public_bytes(serialization.Encoding.PEM).decode())
    return server, trusting


async def test_tls_checks_the_certificate_and_sends_sni_for_the_name_not_the_address(serve, tmp_path) -> None:
    server_tls, trusting = _tls(tmp_path, "api.test")
    public = serve("127.0.0.2", tls=server_tls)
    dns = Resolver({"api.test": [["127.0.0.2"]], "other.test": [["127.0.0.2"]]})
    async with client(Destinations(["api.test", "other.test", "127.0.0.2"], resolver=dns), verify=trusting) as http:
        response = await http.get(public.url("/secure", host="api.test", scheme="https"))
        assert response.text == "hello from 127.0.0.2"
        with pytest.raises(httpx2.ConnectError, match="certificate|hostname"):
            await http.get(public.url("/secure", host="other.test", scheme="https"))
    assert public.server_names[:2] == ["api.test", "other.test"]
    assert public.requests == [("/secure", f"api.test:{public.port}")]
    assert ipaddress.ip_address(public.host).is_loopback


async def test_the_system_resolver_is_used_and_every_address_it_gives_is_checked(serve, connects) -> None:
    """``localhost`` through the real getaddrinfo (no internet needed): refused as loopback unless its
    addresses are listed."""
    local = serve("127.0.0.1")
    async with client(Destinations(["localhost"])) as http:
        with pytest.raises(DestinationRefused) as caught:
            await http.get(local.url(host="localhost"))
    assert caught.value.reason == "loopback" and caught.value.address in ("127.0.0.1", "::1")
    async with client(Destinations(["localhost", "127.0.0.1", "::1"])) as http:
        assert (await http.get(local.url(host="localhost"))).text == "hello from 127.0.0.1"
    assert local.requests == [("/", f"localhost:{local.port}")]
    assert connects()[-1] == "localhost -> 127.0.0.1"


async def test_when_a_checked_address_does_not_answer_the_next_checked_one_is_tried(serve, connects) -> None:
    public = serve("127.0.0.2")
    dns = Resolver({"api.test": [["127.0.0.3", "127.0.0.2"]]})  # nothing listens on 127.0.0.3
    async with client(Destinations(["api.test", "127.0.0.2", "127.0.0.3"], resolver=dns)) as http:
        assert (await http.get(public.url(host="api.test"))).text == "hello from 127.0.0.2"
    assert dns.asked == ["api.test"]
    assert connects() == ["api.test -> 127.0.0.3", "api.test -> 127.0.0.2"]

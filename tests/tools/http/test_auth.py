"""The auth helpers of HTTP tools against a real local server: each type's request as the server got
it, HMAC checked here with hmac/hashlib, OAuth2 against a real token endpoint with the token cached
in a real secret store (file backend), and no secret in the sidecar's log."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from sidecar.errors import Conflict, ManifestError, UpstreamError
from sidecar.logs import ScrubFilter
from sidecar.secrets import mask_url
from sidecar.secrets.store import SecretStore
from sidecar.tools.providers.http.auth import Authenticator, authenticator, load_auth, string_to_sign
from sidecar.tools.providers.http.oauth import OAuthTokens, cache_name
from tests.tools.http.auth_server import AuthServer, auth_server

pytestmark = pytest.mark.anyio

TOOL = "acme:get_item"
API_TOKEN = "tok-Bv7Rn2Xq9Lm4"
PASSWORD = "pw-Kd3Hs8Tz1Wq6"
API_KEY = "key-Mn5Qa2Yc7Ue9"
HMAC_KEY = "hk-Ls4Gp9Vb2Jd7"
RT0 = "rt-0-Initial3Fh8Jd"


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def store(tmp_path: Path) -> SecretStore:
    return SecretStore(tmp_path / "data", "file")


@pytest.fixture
def server() -> Iterator[AuthServer]:
    with auth_server() as s:
        s.refresh_tokens.add(RT0)
        yield s


@pytest.fixture
def log_lines() -> Iterator[list[str]]:
    """What the sidecar's log handler writes (scrubbed as it does), at debug, httpx2's lines too."""
    lines: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(self.format(record))

    handler = Collect(logging.DEBUG)
    handler.addFilter(ScrubFilter())
    root = logging.getLogger()
    old = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield lines
    finally:
        root.removeHandler(handler)
        root.setLevel(old)


async def send(client: httpx2.AsyncClient, request: httpx2.Request, authenticator: Authenticator, *,
               stream: bool = False) -> httpx2.Response:
    """What the runner (http/wire.py) does around a request, for these unit tests: on a 401 an OAuth2
    token is refreshed and the request sent once more; a 401 after that is an UpstreamError.
    Send ``request`` authenticated: on a 401 an OAuth2 token is refreshed and the request sent
    once more; a 401 after that is an UpstreamError (never a loop). Other answers are returned."""
    await authenticator.apply(request)
    response = await client.send(request, stream=stream)
    if response.status_code != 401 or not await authenticator.refresh_after_401():
        return response
    await response.aclose()
    await authenticator.apply(request)
    response = await client.send(request, stream=stream)
    if response.status_code == 401:
        await response.aclose()
        where = authenticator.mask(mask_url(str(request.url.copy_with(query=None))))
        raise UpstreamError("http", (
            f"{where} answered 401 Unauthorized again with a freshly refreshed OAuth2 token: check the "
            "clientId, clientSecret, scope and audience of the tool's auth"), authenticator.tool_id)
    return response


async def call(server: AuthServer, auth: dict[str, Any] | None, store: SecretStore, tokens: OAuthTokens | None = None,
               *, method: str = "GET", path: str = "/echo", settings: dict[str, Any] | None = None,
               clock: Any = None, **request: Any) -> httpx2.Response:
    """One call of a tool with this ``auth:`` block, as the runner makes it: build, apply, send."""
    parsed = None if auth is None else load_auth(auth)
    extra = {} if clock is None else {"clock": clock}
    a = await authenticator(parsed, tool_id=TOOL, settings=settings or {}, environ=store.environ,
                            tokens=tokens or OAuthTokens(store), **extra)
    async with httpx2.AsyncClient() as client:
        return await send(client, client.build_request(method, server.url + path, **request), a)


# -- the declaration ---------------------------------------------------------------------------


@pytest.mark.parametrize(("block", "field"), [
    ({"type": "bearer", "token": API_TOKEN}, "token"),
    ({"type": "basic", "username": "u", "password": "hunter22"}, "password"),
    ({"type": "apiKey", "name": "X-Api-Key", "value": "abc123"}, "value"),
    ({"type": "hmac", "secret": "s3cret-key"}, "secret"),
    ({"type": "oauth2", "tokenUrl": "https://a.example/t", "clientId": "c", "clientSecret": "literal"},
     "clientSecret"),
    ({"type": "oauth2", "grant": "refresh_token", "tokenUrl": "https://a.example/t", "clientId": "c",
      "refreshToken": "abc ${X}"}, "refreshToken"),
])
def test_a_literal_secret_is_refused_at_its_field(block: dict[str, Any], field: str) -> None:
    with pytest.raises(ManifestError) as err:
        load_auth(block, "tools[0].http.auth")
    assert err.value.path == f"tools[0].http.auth.{field}"
    assert "${NAME}" in err.value.reason and "secrets/set" in err.value.reason
    literal = next(v for k, v in block.items() if k == field)
    assert literal not in str(err.value)


def test_oauth2_grants_need_their_secret_and_other_mistakes_say_what_to_fix() -> None:
    with pytest.raises(ManifestError) as err:
        load_auth({"type": "oauth2", "tokenUrl": "https://a.example/t", "clientId": "c"}, "auth")
    assert err.value.path == "auth.clientSecret" and "client_credentials" in err.value.reason
    with pytest.raises(ManifestError) as err:
        load_auth({"type": "oauth2", "tokenUrl": "ftp://a.example/t", "clientId": "c", "clientSecret": "${S}"})
    assert err.value.path == "auth.tokenUrl"
    with pytest.raises(ManifestError) as err:
        load_auth({"type": "apiKey", "name": "X-Key\r\nEvil: 1", "value": "${K}"})
    assert err.value.path == "auth.name"
    with pytest.raises(ManifestError) as err:
        load_auth({"type": "digest", "token": "${K}"})
    assert err.value.path == "auth.type"


# -- each type as the server got it ------------------------------------------------------------


async def test_bearer_basic_and_api_keys_arrive_as_declared(server: AuthServer, store: SecretStore) -> None:
    await store.set("ACME_TOKEN", API_TOKEN)
    await store.set("ACME_PASSWORD", PASSWORD)
    await store.set("ACME_KEY", API_KEY)
    await store.set("ACME_USER", "ann")
    await call(server, {"type": "bearer", "token": "${ACME_TOKEN}"}, store)
    await call(server, {"type": "basic", "username": "${ACME_USER}", "password": "${ACME_PASSWORD}"}, store)
    await call(server, {"type": "apiKey", "name": "X-Api-Key", "value": "${ACME_KEY}"}, store)
    await call(server, {"type": "apiKey", "in": "query", "name": "api_key", "value": "${ACME_KEY}"}, store,
               path="/echo/a%2Fb?x=%20y&z=1")
    bearer, basic, header, query = server.received
    assert bearer.header("authorization") == f"Bearer {API_TOKEN}"
    assert basic.header("authorization") == "Basic " + base64.b64encode(f"ann:{PASSWORD}".encode()).decode()
    assert header.header("x-api-key") == API_KEY
    # The key is appended; what the runner built before it is sent byte for byte.
    assert query.target == f"/echo/a%2Fb?x=%20y&z=1&api_key={API_KEY}"
    assert query.header("x-api-key") is None and query.header("authorization") is None


async def test_a_reference_reads_config_then_the_store_then_the_environment(
        server: AuthServer, store: SecretStore, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACME_ENV_TOKEN", "env-Tq2Wz8Jc5N")
    await store.set("ACME_ENV_TOKEN", "store-Rm4Kp7Xb1D")
    await call(server, {"type": "bearer", "token": "${ACME_ENV_TOKEN}"}, store)
    await call(server, {"type": "bearer", "token": "${api_token}"}, store, settings={"api_token": "cfg-Yh6Ds3Lq9V"})
    await store.delete("ACME_ENV_TOKEN")
    await call(server, {"type": "bearer", "token": "${ACME_ENV_TOKEN}"}, store)
    assert [r.header("authorization") for r in server.received] == [
        "Bearer store-Rm4Kp7Xb1D", "Bearer cfg-Yh6Ds3Lq9V", "Bearer env-Tq2Wz8Jc5N"]


async def test_a_reference_to_nothing_fails_the_call_saying_where_to_set_it(
        server: AuthServer, store: SecretStore) -> None:
    with pytest.raises(Conflict) as err:
        await call(server, {"type": "bearer", "token": "${ACME_NOWHERE}"}, store)
    assert "auth.token" in err.value.message and "ACME_NOWHERE" in err.value.message
    assert "secrets/set" in err.value.message
    with pytest.raises(Conflict) as err:
        await call(server, {"type": "hmac", "secret": "${signing_key}"}, store)
    assert "auth.secret" in err.value.message and "config_schema" in err.value.message
    assert server.received == []  # nothing went out without its credentials


def verify(rec: Any, key: str, sign: list[str], *, algorithm: str = "sha256", header: str = "x-signature",
           prefix: str = "", encoding: str = "hex", body: bytes | None = None) -> bool:
    """What a server does: rebuild the string to sign from the request it got, compare the MAC."""
    stamp = rec.header("x-timestamp") or ""
    message = string_to_sign(rec.method, rec.path.encode(), rec.raw_query.encode(), stamp,
                             rec.body if body is None else body, sign)
    digest = hmac.new(key.encode(), message, getattr(hashlib, algorithm)).digest()
    expected = prefix + (digest.hex() if encoding == "hex" else base64.b64encode(digest).decode())
    return hmac.compare_digest(rec.header(header) or "", expected)


async def test_hmac_signs_the_bytes_sent_and_a_tampered_body_fails(server: AuthServer, store: SecretStore) -> None:
    await store.set("ACME_HMAC", HMAC_KEY)
    clock = Clock()
    every = ["method", "path", "query", "timestamp", "body"]
    await call(server, {"type": "hmac", "secret": "${ACME_HMAC}"}, store, method="POST", path="/echo/i%2Fj?q=a%20b",
               json={"name": "café", "n": 1}, clock=clock)
    rec = server.received[-1]
    assert rec.header("x-timestamp") == str(int(clock.now))
    assert verify(rec, HMAC_KEY, every)
    # Hand-built, independent of string_to_sign: the documented format.
    by_hand = b"\n".join([b"POST", b"/echo/i%2Fj", b"q=a%20b", str(int(clock.now)).encode(), rec.body])
    assert rec.header("x-signature") == hmac.new(HMAC_KEY.encode(), by_hand, hashlib.sha256).hexdigest()
    tampered = rec.body.replace(b"1", b"2")
    assert tampered != rec.body and not verify(rec, HMAC_KEY, every, body=tampered)
    assert not verify(rec, "another-key", every)


async def test_hmac_options_algorithm_parts_header_prefix_and_base64(server: AuthServer, store: SecretStore) -> None:
    block = {"type": "hmac", "secret": "${hmac_key}", "algorithm": "sha512", "header": "X-Hub-Signature",
             "prefix": "sha512=", "sign": ["body", "method"], "encoding": "base64"}
    await call(server, block, store, method="PUT", path="/echo", content=b"raw \x00 bytes",
               settings={"hmac_key": HMAC_KEY})
    rec = server.received[-1]
    assert rec.header("x-timestamp") is None  # not a signed part: not sent
    assert verify(rec, HMAC_KEY, ["body", "method"], algorithm="sha512", header="x-hub-signature",
                  prefix="sha512=", encoding="base64")
    assert not verify(rec, HMAC_KEY, ["method", "body"], algorithm="sha512", header="x-hub-signature",
                      prefix="sha512=", encoding="base64")


# -- OAuth2 ------------------------------------------------------------------------------------


def oauth(server: AuthServer, **extra: Any) -> dict[str, Any]:
    return {"type": "oauth2", "tokenUrl": server.url + "/token", "clientId": server.client_id,
            "clientSecret": "${ACME_CLIENT_SECRET}", "scope": "items:read", **extra}


async def test_client_credentials_gets_a_token_once_and_uses_it(server: AuthServer, store: SecretStore) -> None:
    await store.set("ACME_CLIENT_SECRET", server.client_secret)
    tokens = OAuthTokens(store)
    for _ in range(3):
        response = await call(server, oauth(server, audience="https://api.acme"), store, tokens, path="/protected")
        assert response.status_code == 200
    assert len(server.token_requests) == 1
    first = server.token_requests[0]
    assert first["basic"] and first["client_id"] == server.client_id
    assert first["form"] == {"grant_type": "client_credentials", "scope": "items:read", "audience": "https://api.acme"}
    cached = json.loads(await store.get(cache_name(TOOL)) or "{}")
    assert cached["accessToken"] == "at-1-Hq7Xv2Lr9K" and cached["expiresAt"] > cached["refreshAt"]


async def test_client_secret_post_sends_the_client_in_the_form(server: AuthServer, store: SecretStore) -> None:
    await store.set("ACME_CLIENT_SECRET", server.client_secret)
    response = await call(server, oauth(server, authMethod="client_secret_post"), store, path="/protected")
    assert response.status_code == 200
    token = server.received[0]
    assert token.header("authorization") is None
    assert server.token_requests[0]["form"]["client_secret"] == server.client_secret


async def test_a_401_refreshes_exactly_once_and_the_retry_succeeds(server: AuthServer, store: SecretStore) -> None:
    await store.set("ACME_CLIENT_SECRET", server.client_secret)
    tokens = OAuthTokens(store)
    assert (await call(server, oauth(server), store, tokens, path="/protected")).status_code == 200
    server.revoke()
    response = await call(server, oauth(server), store, tokens, path="/protected")
    assert response.status_code == 200 and response.json()["token"] == "at-2-Hq7Xv2Lr9K"
    assert len(server.token_requests) == 2
    assert [r.path for r in server.received] == ["/token", "/protected", "/protected", "/token", "/protected"]


async def test_a_second_401_after_the_refresh_fails_the_call_clearly(server: AuthServer, store: SecretStore) -> None:
    await store.set("ACME_CLIENT_SECRET", server.client_secret)
    server.always_401 = True
    with pytest.raises(UpstreamError) as err:
        await call(server, oauth(server), store, path="/protected?x=1")
    assert "401" in err.value.message and "again" in err.value.message and "/protected" in err.value.message
    assert len(server.token_requests) == 2  # the first token, one refresh: no loop
    assert [r.path for r in server.received].count("/protected") == 2


async def test_other_types_leave_a_401_to_the_caller(server: AuthServer, store: SecretStore) -> None:
    await store.set("ACME_TOKEN", API_TOKEN)
    response = await call(server, {"type": "bearer", "token": "${ACME_TOKEN}"}, store, path="/protected")
    assert response.status_code == 401 and len(server.received) == 1


async def test_a_token_is_renewed_a_minute_before_it_expires(server: AuthServer, store: SecretStore) -> None:
    await store.set("ACME_CLIENT_SECRET", server.client_secret)
    clock = Clock()
    tokens = OAuthTokens(store, clock=clock)
    await call(server, oauth(server), store, tokens, path="/protected")
    clock.now += 3600 - 61
    await call(server, oauth(server), store, tokens, path="/protected")
    assert len(server.token_requests) == 1
    clock.now += 2  # 59 s left
    await call(server, oauth(server), store, tokens, path="/protected")
    assert len(server.token_requests) == 2
    assert [r.path for r in server.received].count("/protected") == 3  # renewed before, never a 401


async def test_a_rotated_refresh_token_replaces_the_old_one_and_survives_a_restart(
        server: AuthServer, tmp_path: Path) -> None:
    server.rotate = True
    store = SecretStore(tmp_path / "data", "file")
    await store.set("ACME_CLIENT_SECRET", server.client_secret)
    await store.set("ACME_REFRESH", RT0)
    block = oauth(server, grant="refresh_token", refreshToken="${ACME_REFRESH}")
    await call(server, block, store, OAuthTokens(store), path="/protected")
    assert server.token_requests[0]["form"]["refresh_token"] == RT0
    cached = json.loads(await store.get(cache_name(TOOL)) or "{}")
    assert cached["refreshToken"] == "rt-1-Pz4Mk8Wd1S" and RT0 not in server.refresh_tokens

    # A restart: a new store over the same directory, a new cache. The token is still good.
    store2 = SecretStore(tmp_path / "data", "file")
    tokens2 = OAuthTokens(store2)
    assert (await call(server, block, store2, tokens2, path="/protected")).status_code == 200
    assert len(server.token_requests) == 1
    # Its expiry over on the server: the refresh uses the rotated token (the configured one is spent).
    server.revoke()
    assert (await call(server, block, store2, tokens2, path="/protected")).status_code == 200
    assert server.token_requests[1]["form"]["refresh_token"] == "rt-1-Pz4Mk8Wd1S"
    assert json.loads(await store2.get(cache_name(TOOL)) or "{}")["refreshToken"] == "rt-2-Pz4Mk8Wd1S"


async def test_a_changed_client_secret_drops_the_cached_token(server: AuthServer, store: SecretStore) -> None:
    await store.set("ACME_CLIENT_SECRET", server.client_secret)
    tokens = OAuthTokens(store)
    await call(server, oauth(server), store, tokens, path="/protected")
    await store.set("ACME_CLIENT_SECRET", "cs-Wrong5Yt2")
    with pytest.raises(UpstreamError):
        await call(server, oauth(server), store, tokens, path="/protected")
    assert len(server.token_requests) == 2


async def test_concurrent_calls_share_one_token_request_and_one_refresh(store: SecretStore) -> None:
    with auth_server(token_delay=0.2) as server:
        await store.set("ACME_CLIENT_SECRET", server.client_secret)
        tokens = OAuthTokens(store)
        statuses: list[int] = []

        async def one() -> None:
            statuses.append((await call(server, oauth(server), store, tokens, path="/protected")).status_code)

        async with anyio.create_task_group() as tg:
            for _ in range(12):
                tg.start_soon(one)
        assert len(server.token_requests) == 1
        server.revoke()  # every call now holds a dead token and gets a 401 with it
        async with anyio.create_task_group() as tg:
            for _ in range(12):
                tg.start_soon(one)
        assert statuses == [200] * 24
        assert len(server.token_requests) == 2


async def test_token_endpoint_errors_name_it_and_mask_secrets(server: AuthServer, store: SecretStore,
                                                             log_lines: list[str]) -> None:
    wrong = "cs-Leaky7Pq3Zr"
    await store.set("ACME_CLIENT_SECRET", wrong)
    with pytest.raises(UpstreamError) as err:
        await call(server, oauth(server, tokenUrl=server.url + "/token?key=qk-Hidden8Rt4"), store, path="/protected")
    message = err.value.message
    assert f"{server.http.netloc}/token" in message and "401" in message and "invalid_client" in message
    assert wrong not in str(err.value) and "qk-Hidden8Rt4" not in str(err.value)
    assert all(wrong not in line for line in log_lines)

    with auth_server() as dead:
        url = dead.url
    with pytest.raises(UpstreamError) as err:
        await call(server, oauth(server, tokenUrl=url + "/token"), store, path="/protected")
    assert "could not be reached" in err.value.message and url.removeprefix("http://") in err.value.message


async def test_no_secret_in_the_log(server: AuthServer, store: SecretStore, log_lines: list[str]) -> None:
    server.rotate = True
    values = {"ACME_TOKEN": API_TOKEN, "ACME_PASSWORD": PASSWORD, "ACME_KEY": API_KEY, "ACME_HMAC": HMAC_KEY,
              "ACME_CLIENT_SECRET": server.client_secret, "ACME_REFRESH": RT0}
    for name, value in values.items():
        await store.set(name, value)
    await call(server, {"type": "bearer", "token": "${ACME_TOKEN}"}, store)
    await call(server, {"type": "basic", "username": "ann", "password": "${ACME_PASSWORD}"}, store)
    await call(server, {"type": "apiKey", "in": "query", "name": "api_key", "value": "${ACME_KEY}"}, store)
    await call(server, {"type": "hmac", "secret": "${ACME_HMAC}"}, store, method="POST", json={"a": 1})
    tokens = OAuthTokens(store)
    block = oauth(server, grant="refresh_token", refreshToken="${ACME_REFRESH}")
    await call(server, block, store, tokens, path="/protected")
    server.revoke()
    await call(server, block, store, tokens, path="/protected")
    issued = ["at-1-Hq7Xv2Lr9K", "at-2-Hq7Xv2Lr9K", "rt-1-Pz4Mk8Wd1S", "rt-2-Pz4Mk8Wd1S"]
    basic = base64.b64encode(f"ann:{PASSWORD}".encode()).decode()
    text = "\n".join(log_lines)
    assert "HTTP Request" in text and "renewed" in text  # the log did see these calls
    for value in [*values.values(), *issued, basic]:
        assert value not in text, value


def test_every_example_of_the_readme_table_is_a_valid_auth_block() -> None:
    import yaml  # the README's examples are YAML, as in toolset.yaml

    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text()
    rows = [line for line in readme.splitlines() if line.startswith("| `") and "{type:" in line]
    assert len(rows) == 5
    for row in rows:
        example = row.rsplit("|", 2)[1].strip().strip("`")
        assert load_auth(yaml.safe_load(example)).__struct_config__.tag == row.split("`")[1]


def test_a_token_url_over_plain_http_is_only_for_this_machine() -> None:
    block = {"type": "oauth2", "tokenUrl": "http://auth.acme.example/token", "clientId": "c", "clientSecret": "${S}"}
    with pytest.raises(ManifestError) as err:
        load_auth(block)
    assert err.value.path == "auth.tokenUrl" and "https://" in err.value.reason
    for local in ("http://127.0.0.1:8080/token", "http://localhost/token", "http://[::1]:9/token"):
        assert load_auth({**block, "tokenUrl": local})


async def test_refresh_after_401_answers_true_once_a_call_and_never_for_other_types(
        server: AuthServer, store: SecretStore) -> None:
    await store.set("ACME_CLIENT_SECRET", server.client_secret)
    await store.set("ACME_TOKEN", API_TOKEN)
    tokens = OAuthTokens(store)
    a = await authenticator(load_auth(oauth(server)), tool_id=TOOL, settings={}, environ=store.environ, tokens=tokens)
    await a.apply(httpx2.Request("GET", server.url + "/protected"))
    assert await a.refresh_after_401() is True
    assert await a.refresh_after_401() is False  # the runner's second 401 fails the call
    assert len(server.token_requests) == 2
    b = await authenticator(load_auth({"type": "bearer", "token": "${ACME_TOKEN}"}), tool_id=TOOL, settings={},
                            environ=store.environ, tokens=tokens)
    assert await b.refresh_after_401() is False

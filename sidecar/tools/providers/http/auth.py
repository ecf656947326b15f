"""Auth helpers of an HTTP tool: the ``auth:`` block of its ``http:`` declaration (`HttpAuth`) and
what a call does with it (`Authenticator`).

Secrets are never written in a manifest. Every field that holds one (``token``, ``password``,
``value``, ``secret``, ``clientSecret``, ``refreshToken``) must be exactly one ``${NAME}`` reference;
a literal is refused when the manifest is checked (ManifestError at that field, saying to write
``${NAME}`` and store the value with ``secrets/set``): a manifest is shared, exported and shown, a
key pasted into it would leak through all of those. A reference resolves, at call time, to:

1. the tool's (or its toolset's) config value of that name, when one is declared
   (``config_schema``; lower-case keys, e.g. ``${api_key}``), else
2. the user's secret of that name in the secret store (``secrets/set``; upper-case, ``${API_KEY}``), else
3. the environment the app was started from.

An argument of the call never fills an auth field: the model must not choose credentials.

HMAC signing (``type: hmac``) signs the request as it is sent, after the body is built. The string to
sign is the parts listed in ``sign`` (default ``[method, path, query, timestamp, body]``), in that
order, joined by a newline (``\\n``):

- ``method``: the method, upper-case (``POST``);
- ``path``: the path exactly as sent, percent-encoding kept, without the query (``/v1/items/a%2Fb``);
- ``query``: the query string exactly as sent, without ``?`` (empty when there is none);
- ``timestamp``: Unix time in whole seconds, also sent in the ``timestampHeader`` header;
- ``body``: the body bytes exactly as sent (empty when there is none).

The signature is ``prefix`` + HMAC(``secret``, that string) with ``algorithm``, as ``hex`` (lower
case) or ``base64``, in the ``header`` header. A server checks it by rebuilding the same string.

Every secret value an authenticator uses, and every token it gets, is registered with
``secrets.known``: log lines, errors and the recorded request are scrubbed of them.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Annotated, Any, Literal
from urllib.parse import quote, urlsplit

import msgspec

from ....errors import Conflict, ManifestError
from ....secrets.known import remember
from ....secrets.masking import clean
from ....secrets.store import is_user_name
from ....secrets.variables import references
from .oauth import Grant, OAuthTokens

if TYPE_CHECKING:  # httpx2 is heavy: loaded by the call path, never at start-up
    import httpx2

log = logging.getLogger("sidecar.tools.http")

SECRET_REF = r"^\$\{[A-Za-z_][A-Za-z0-9_]{0,127}\}$"
SECRET_HINT = ("a secret is never written in the manifest: write ${NAME} and store the value with secrets/set "
               "(or declare a secret config field and write ${field})")
HEADER_NAME = r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,128}$"  # an RFC 9110 token: no space, colon or line break

# A field that holds a secret: exactly one ${NAME}, never the value itself.
Ref = Annotated[str, msgspec.Meta(pattern=SECRET_REF, description="${NAME}: a config field, a secret or a variable")]
HeaderName = Annotated[str, msgspec.Meta(pattern=HEADER_NAME)]
Url = Annotated[str, msgspec.Meta(pattern=r"^https?://[^\s]+$", max_length=2048)]
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})  # where plain http:// stays on the machine
SignedPart = Literal["method", "path", "query", "timestamp", "body"]
SECRET_FIELDS = frozenset({"token", "password", "value", "secret", "clientSecret", "refreshToken"})


class _Auth(msgspec.Struct, tag_field="type", forbid_unknown_fields=True, kw_only=True,
            rename="camel"):
    pass


class BearerAuth(_Auth, tag="bearer", kw_only=True):
    """``Authorization: Bearer <token>``."""

    token: Ref
    scheme: Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9._-]{1,32}$")] = "Bearer"


class BasicAuth(_Auth, tag="basic", kw_only=True):
    """``Authorization: Basic base64(username:password)``."""

    username: Annotated[str, msgspec.Meta(max_length=256)]  # not a secret: a literal or a ${NAME}
    password: Ref


class ApiKeyAuth(_Auth, tag="apiKey", kw_only=True):
    """A key in a header (``X-Api-Key: <value>``) or a query parameter (``?api_key=<value>``)."""

    name: HeaderName
    where: Literal["header", "query"] = msgspec.field(default="header", name="in")
    value: Ref


class HmacAuth(_Auth, tag="hmac", kw_only=True):
    """A signature of the request as sent (see the module's docstring for the string to sign)."""

    secret: Ref
    algorithm: Literal["sha256", "sha384", "sha512", "sha1"] = "sha256"
    header: HeaderName = "X-Signature"
    prefix: Annotated[str, msgspec.Meta(pattern=r"^[\x21-\x7e]{0,32}$")] = ""  # e.g. "sha256="
    sign: Annotated[list[SignedPart], msgspec.Meta(min_length=1)] = msgspec.field(
        default_factory=lambda: ["method", "path", "query", "timestamp", "body"])
    timestamp_header: HeaderName = "X-Timestamp"
    encoding: Literal["hex", "base64"] = "hex"


class OAuth2Auth(_Auth, tag="oauth2", kw_only=True):
    """A bearer token from ``tokenUrl`` (RFC 6749): client credentials (§4.4) or a refresh token
    (§6), cached in the secret store and renewed before it expires or on a 401."""

    grant: Literal["client_credentials", "refresh_token"] = "client_credentials"
    token_url: Url
    client_id: Annotated[str, msgspec.Meta(min_length=1, max_length=512)]
    client_secret: Ref | None = None  # a public client (refresh_token grant) has none
    refresh_token: Ref | None = None
    scope: Annotated[str, msgspec.Meta(max_length=2048)] | None = None
    audience: Annotated[str, msgspec.Meta(max_length=2048)] | None = None
    auth_method: Literal["client_secret_basic", "client_secret_post"] = "client_secret_basic"

    def __post_init__(self) -> None:
        scheme, _, rest = self.token_url.partition("://")
        host = urlsplit(self.token_url).hostname or ""
        if scheme.lower() == "http" and host not in LOOPBACK_NAMES:
            raise ValueError(f"tokenUrl: use https:// (over http:// the client secret and the tokens would cross "
                             f"the network in clear); http:// is only for {', '.join(sorted(LOOPBACK_NAMES))}")
        if self.grant == "client_credentials" and self.client_secret is None:
            raise ValueError("clientSecret: the client_credentials grant needs it (write ${NAME})")
        if self.grant == "refresh_token" and self.refresh_token is None:
            raise ValueError("refreshToken: the refresh_token grant needs it (write ${NAME})")


HttpAuth = BearerAuth | BasicAuth | ApiKeyAuth | HmacAuth | OAuth2Auth


def is_secret_field(path: str) -> bool:
    """``path`` (``tools[0].http.auth.token``) is a field of an ``auth:`` block that holds a secret."""
    head, _, last = path.rpartition(".")
    return head.endswith(".auth") and last in SECRET_FIELDS


def load_auth(data: Any, where: str = "auth") -> HttpAuth:
    """An ``auth:`` block as data (parsed YAML), checked.

    Raises:
        ManifestError: at the field to fix; a literal secret says to use ``${NAME}`` and secrets/set.
    """
    try:
        return msgspec.convert(data, HttpAuth)
    except msgspec.ValidationError as exc:
        path, reason = auth_error(where, str(exc))
        raise ManifestError(path, reason) from None


def auth_error(where: str, text: str) -> tuple[str, str]:
    """Where and why, from msgspec's text of an error in an ``auth:`` block at ``where``: a literal
    secret says what to write instead; a check of two fields names the one to fix."""
    reason, sep, at = text.rpartition(" - at `")
    if not sep:
        reason, at = text, ""
    inner = at.rstrip("`").removeprefix("$").removeprefix(".")
    path = f"{where}.{inner}" if inner else where
    field, colon, rest = reason.partition(": ")
    if colon and field.isidentifier():  # a __post_init__ check: "clientSecret: ..."
        path, reason = f"{path}.{field}", rest
    if "matching regex" in reason and is_secret_field(path):
        reason = SECRET_HINT
    return path, reason


def refs_of(auth: HttpAuth) -> dict[str, str]:
    """Field (as in YAML) -> the name its ``${NAME}`` refers to, for every secret field set (and a
    basic username given as a reference)."""
    fields = {"token": getattr(auth, "token", None), "username": getattr(auth, "username", None),
              "password": getattr(auth, "password", None),
              "value": getattr(auth, "value", None), "secret": getattr(auth, "secret", None),
              "clientSecret": getattr(auth, "client_secret", None),
              "refreshToken": getattr(auth, "refresh_token", None)}
    out: dict[str, str] = {}
    for field, text in fields.items():
        if isinstance(text, str) and (names := references(text)):
            out[field] = names[0]
    return out


# -- resolving the references ------------------------------------------------------------------


# What ``${NAME}`` resolves against: the sidecar's is ``SecretStore.environ`` (the user's secrets,
# then the process environment).
Environ = Callable[[Iterable[str]], Awaitable[Mapping[str, str]]]


async def resolve_refs(auth: HttpAuth, settings: Mapping[str, Any], environ: Environ,
                       tool_id: str) -> dict[str, str]:
    """Field -> value for every secret field of ``auth``: config value, else secret, else environment.

    Raises:
        Conflict: a reference names nothing that is set; the message says where to set it.
    """
    refs = refs_of(auth)
    variables = await environ([n for n in refs.values() if n not in settings])
    out: dict[str, str] = {}
    for field, name in refs.items():
        value = settings.get(name)
        if value is None:
            value = variables.get(name)
        if value is None or not str(value).strip():
            where = (f"store it with secrets/set (name {name!r}) or set it in the environment the app starts from"
                     if is_user_name(name) else
                     f"declare {name!r} in the tool's config_schema (secret: true) and set it with config/set")
            raise Conflict("secret not set",
                           f"{tool_id}: auth.{field} refers to ${{{name}}}, which is not set: {where}")
        out[field] = str(value).strip()
        remember(out[field])
    return out


async def authenticator(auth: HttpAuth | None, *, tool_id: str, settings: Mapping[str, Any], environ: Environ,
                        tokens: OAuthTokens, transport: Callable[[], httpx2.AsyncBaseTransport] | None = None,
                        clock: Callable[[], float] = time.time) -> Authenticator:
    """The authenticator of one call of ``tool_id`` (canonical ``toolsetId:toolId``): its references
    resolved (``settings``: the call's config values), its OAuth2 grant bound to ``tokens`` (the
    sidecar's one cache) and to ``transport`` (the tool's destination guard, which the token
    endpoint goes through too). ``environ``: ``SecretStore.environ``.

    Raises:
        Conflict: a ``${NAME}`` names nothing that is set.
    """
    if auth is None:
        return Authenticator(None, {}, tool_id=tool_id)
    values = await resolve_refs(auth, settings, environ, tool_id)
    grant = None
    if isinstance(auth, OAuth2Auth):
        grant = Grant(tool_id=tool_id, grant=auth.grant, token_url=auth.token_url, client_id=auth.client_id,
                      client_secret=values.get("clientSecret"), refresh_token=values.get("refreshToken"),
                      scope=auth.scope, audience=auth.audience, auth_method=auth.auth_method, transport=transport)
    return Authenticator(auth, values, tool_id=tool_id, tokens=tokens, grant=grant, clock=clock)


# -- a call's authenticator --------------------------------------------------------------------


class Authenticator:
    """What one call of an HTTP tool does to authenticate: `apply` to each request just before it
    is sent (after its body is built: an HMAC signs the bytes sent), `refresh_after_401` when the
    answer is 401 (True: apply again and send again, once)."""

    def __init__(self, auth: HttpAuth | None, values: Mapping[str, str], *, tool_id: str,
                 tokens: OAuthTokens | None = None, grant: Grant | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.auth = auth
        self.tool_id = tool_id
        self._values = dict(values)
        self._tokens = tokens
        self._grant = grant
        self._clock = clock
        self._used: str | None = None  # the OAuth2 access token the last request carried
        self._refreshed = False
        if isinstance(auth, BasicAuth):
            self._values["basic"] = _basic(self._values.pop("username", auth.username), self._values["password"])
        remember_all(self._values.values())

    def secret_values(self) -> list[str]:
        """Every secret value this authenticator put or may put on a request (for masking)."""
        return [v for v in (*self._values.values(), self._used) if v]

    def mask(self, text: str) -> str:
        """``text`` with every secret value this process knows, and every secret by its shape, masked
        (the recorded request, an error)."""
        return clean(text)

    async def apply(self, request: httpx2.Request) -> None:
        auth = self.auth
        if auth is None:
            return
        if isinstance(auth, BearerAuth):
            request.headers["Authorization"] = f"{auth.scheme} {self._values['token']}"
        elif isinstance(auth, BasicAuth):
            request.headers["Authorization"] = f"Basic {self._values['basic']}"
        elif isinstance(auth, ApiKeyAuth):
            if auth.where == "header":
                request.headers[auth.name] = self._values["value"]
            else:
                _add_query(request, auth.name, self._values["value"])
        elif isinstance(auth, HmacAuth):
            await self._sign(auth, request)
        else:
            assert self._tokens is not None and self._grant is not None
            self._used = await self._tokens.token(self._grant)
            request.headers["Authorization"] = f"Bearer {self._used}"

    async def refresh_after_401(self) -> bool:
        """OAuth2: get a new token, once per call (a second 401 is the caller's error); a token some
        other call already replaced counts as the refresh. Every other type: False."""
        if not isinstance(self.auth, OAuth2Auth) or self._refreshed:
            return False
        assert self._tokens is not None and self._grant is not None
        self._refreshed = True
        await self._tokens.refresh(self._grant, stale=self._used)
        return True

    async def _sign(self, auth: HmacAuth, request: httpx2.Request) -> None:
        body = await request.aread()  # what will be sent: built and encoded already
        stamp = str(int(self._clock()))
        if "timestamp" in auth.sign:
            request.headers[auth.timestamp_header] = stamp
        raw_path = request.url.raw_path.partition(b"?")[0]
        parts = {"method": request.method.upper().encode(), "path": raw_path, "query": request.url.query,
                 "timestamp": stamp.encode(), "body": body}
        message = b"\n".join(parts[p] for p in auth.sign)
        digest = hmac.new(self._values["secret"].encode(), message, getattr(hashlib, auth.algorithm)).digest()
        signature = digest.hex() if auth.encoding == "hex" else base64.b64encode(digest).decode()
        request.headers[auth.header] = auth.prefix + signature


def string_to_sign(method: str, raw_path: bytes, query: bytes, timestamp: str, body: bytes,
                   sign: Iterable[str]) -> bytes:
    """The string an HMAC signs (the module's docstring), for a server or a test to rebuild."""
    parts = {"method": method.upper().encode(), "path": raw_path, "query": query, "timestamp": timestamp.encode(),
             "body": body}
    return b"\n".join(parts[p] for p in sign)


def _basic(username: str, password: str) -> str:
    encoded = base64.b64encode(f"{username}:{password}".encode()).decode()
    remember(encoded)  # the header's value decodes to the password: it is as secret
    return encoded


def _add_query(request: httpx2.Request, name: str, value: str) -> None:
    """Append ``name=value`` to the query as sent, leaving the rest of it byte for byte."""
    pair = f"{quote(name, safe='')}={quote(value, safe='')}".encode()
    query = request.url.query
    request.url = request.url.copy_with(query=query + b"&" + pair if query else pair)


def remember_all(values: Iterable[str]) -> None:
    for value in values:
        remember(value)

"""Running an HTTP tool: its requests in order, each templated (``templates.py``), sent with httpx2
(``wire.py``: read as a stream that stops at ``maxResponseBytes``, retried with back-off and
jitter), and its response mapped to the result (``results.py``).

Limits, and what happens at each:
- ``timeout``: seconds for one request, from sending to the last byte of the body (a server that
  trickles its answer, a slow loris, is cut there too); the tool's own ``timeout`` bounds the whole
  call, retries and waits included.
- Retries (``maxRetries``): on a connection error, 429 and 5xx, with exponential back-off and full
  jitter. ``Retry-After`` (seconds or a date) is honoured up to ``maxRetryWait``; a server asking
  for longer fails the call at once, saying how long it asked for. POST and PATCH are retried only
  when the server surely did not act on the request: the connection was never made, 429, or 503.
- ``maxRequestBytes`` / ``maxResponseBytes``: a body over the limit is never sent; a response over
  it is read no further (a 1 GB or never-ending body costs at most the limit).
- ``maxCallsPerMinute``: a call over the rate FAILS at once (error kind ``rate_limited``, the
  message says when the next call can go) rather than waiting: a chat turn should not hang for up
  to a minute on a tool, and the model can say so or try later.
- Cancelling the call (``$/cancelRequest``, a cancelled turn) aborts the request in flight: the
  connection is closed.

Secrets: every value a call takes from the secret store, the environment or a secret config field
is masked in the result, in error messages and in the log line of each request.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

import anyio
import msgspec

from .... import secrets
from ....errors import Conflict
from ....secrets.known import remember
from ....secrets.shapes import looks_like_credential, looks_secret_name
from ...resolved import HttpConfig, Resolved
from ...runner import Run, ToolFailed, ToolRunner
from . import results, templates
from .auth import Authenticator, authenticator
from .guard import Destinations
from .oauth import OAuthTokens
from .results import ResultError
from .spec import HttpSpec, SpecError, StepSpec, check
from .templates import PLACEHOLDER, MissingValue, RenderError, Template, UrlTemplate, Values
from .wire import POOL, HttpFailure, What, check_destination, make_client, send, shown

log = logging.getLogger("sidecar.tools.http")

Environ = Callable[[Iterable[str]], Awaitable[Mapping[str, str]]]
MIN_HIDDEN = 4  # as secrets.scrub: shorter values would mask ordinary words


@dataclass(frozen=True)
class HttpCall:
    tool_id: str
    spec: dict[str, Any] | None  # the tool's declaration as stored: an HttpSpec as data
    input_schema: dict[str, Any] | None
    args: dict[str, Any]
    settings: dict[str, Any]  # the tool's config values, secret ones included
    secret_keys: frozenset[str]  # which settings are secret
    timeout: float  # the whole call, retries included
    sent: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])  # filled as requests go: the call's record


@dataclass
class _Step:
    spec: StepSpec
    url: UrlTemplate
    query: list[tuple[Template, Template]]


@dataclass
class _Prepared:
    tool_id: str
    raw: Any  # config["http"] as stored: a changed declaration is prepared again
    spec: HttpSpec
    steps: list[_Step]
    arg_names: frozenset[str]
    names: frozenset[str]  # placeholders that are config values or secrets
    destinations: Destinations  # allowedHosts, as the guard applies them
    client: Any = None  # httpx2.AsyncClient, made on the first call
    # At most POOL calls of the tool in flight; the others wait here before doing any work, so a
    # burst of calls never holds the event loop for long (each waits its turn cheaply) and the
    # pool's bookkeeping, which grows with its queue, stays small.
    gate: anyio.Semaphore = field(default_factory=lambda: anyio.Semaphore(POOL))
    calls: deque[float] = field(default_factory=deque[float])  # start times within the last minute


class HttpTools(ToolRunner):
    """The HTTP tools' runner: one per sidecar, one connection pool per tool."""

    def __init__(self, environ: Environ, tokens: OAuthTokens, default_timeout: float) -> None:
        self._environ = environ
        self._tokens = tokens
        self.default_timeout = default_timeout  # seconds, for a tool whose config names none
        self._prepared: dict[str, _Prepared] = {}
        self._retired: list[Any] = []

    async def aclose(self) -> None:
        clients = [p.client for p in self._prepared.values() if p.client is not None] + self._retired
        self._prepared.clear()
        self._retired.clear()
        with anyio.CancelScope(shield=True):
            for client in clients:
                await client.aclose()

    async def run(self, target: Resolved, call: Run) -> Any:
        config, settings = target.config, target.settings
        assert isinstance(config, HttpConfig)
        secret_keys = frozenset(settings.secrets) if settings is not None else frozenset[str]()
        try:
            return await self.perform(HttpCall(target.tool.id, config.http, target.tool.input_schema, call.args,
                                            call.settings or {}, secret_keys, config.timeout or self.default_timeout,
                                            call.sent))
        except HttpFailure as exc:
            raise ToolFailed(exc.message, exc.kind, exc.result) from None

    async def perform(self, call: HttpCall) -> Any:
        """The call's requests, in order; its result, or ``HttpFailure``."""
        p = self._prepare(call)
        if p.spec.max_calls_per_minute is not None:
            _admit(call.tool_id, p, p.spec.max_calls_per_minute)
        deadline = anyio.current_time() + call.timeout
        try:
            with anyio.fail_after(call.timeout):  # waiting for a turn counts too
                async with p.gate:
                    return await self._run(call, p, deadline)
        except TimeoutError:
            raise HttpFailure(f"the tool {call.tool_id} took longer than its timeout ({call.timeout:g} s)",
                              "timeout") from None

    async def _run(self, call: HttpCall, p: _Prepared, deadline: float) -> Any:
        named, hidden = await self._named(call, p)
        try:
            auth = await authenticator(p.spec.auth, tool_id=call.tool_id, settings=call.settings,
                                       environ=self._environ, tokens=self._tokens,
                                       transport=lambda: p.destinations.transport(trust_env=False))
        except Conflict as exc:
            raise HttpFailure(exc.message, "unconfigured") from None
        hidden = hidden + [v for v in auth.secret_values() if len(v) >= MIN_HIDDEN]
        values = Values(call.args, p.arg_names, named)
        try:
            result: Any = None
            for step in p.steps:
                result = await self._step(call, p, step, values, hidden, deadline, auth)
                values.steps[step.spec.id] = result
        except HttpFailure as exc:
            shown = hidden + [v for v in auth.secret_values() if len(v) >= MIN_HIDDEN]  # an OAuth2 token too
            raise HttpFailure(secrets.scrub(exc.message, shown), exc.kind,
                              secrets.scrub_json(exc.result, shown)) from None
        return secrets.scrub_json(result, hidden + [v for v in auth.secret_values() if len(v) >= MIN_HIDDEN])

    # -- preparing ------------------------------------------------------------------------------

    def _prepare(self, call: HttpCall) -> _Prepared:
        raw = call.spec
        p = self._prepared.get(call.tool_id)
        if p is not None and (p.raw is raw or p.raw == raw):
            return p
        try:
            spec = msgspec.convert(raw, HttpSpec)
            check(spec, call.input_schema)
        except (msgspec.ValidationError, SpecError) as exc:
            # Checked when the toolset was installed; only a database edited by hand gets here.
            raise HttpFailure(f"the tool's http declaration is not valid: {exc}", "load") from None
        arg_names = frozenset((call.input_schema or {}).get("properties") or {})
        steps = [_Step(s, UrlTemplate(s.url_template), _query(s)) for s in spec.requests()]
        step_ids = {s.id for s in spec.requests()}
        used = {name.split(".")[0] for s in spec.requests() for text in _texts(s) for name in PLACEHOLDER.findall(text)}
        fresh = _Prepared(call.tool_id, raw, spec, steps, arg_names, frozenset(used - arg_names - step_ids),
                          Destinations(spec.allowed_hosts))
        if p is not None:
            fresh.calls = p.calls  # the rate holds across an upgrade
            if p.client is not None:
                self._retired.append(p.client)  # a call may still be using it; closed with the runner
        self._prepared[call.tool_id] = fresh
        return fresh

    async def _named(self, call: HttpCall, p: _Prepared) -> tuple[dict[str, Any], list[str]]:
        """The config values and secrets the templates use, and which values must never be shown."""
        named: dict[str, Any] = {}
        hidden: list[str] = []
        wanted = [n for n in p.names if n not in call.settings]
        env: Mapping[str, str] = await self._environ(wanted) if wanted else {}
        for name in p.names:
            if name in call.settings:
                named[name] = call.settings[name]
                if name in call.secret_keys and isinstance(call.settings[name], str):
                    hidden.append(call.settings[name])
            elif (value := env.get(name)) is not None:
                named[name] = value
                hidden.append(value)  # from the secret store or the environment: never shown
                if looks_secret_name(name) or looks_like_credential(value):
                    remember(value)  # and scrubbed from every log line
        return named, [h for h in hidden if len(h) >= MIN_HIDDEN]

    # -- one request ----------------------------------------------------------------------------

    async def _step(self, call: HttpCall, p: _Prepared, step: _Step, values: Values, hidden: list[str],
                    deadline: float, auth: Authenticator) -> Any:
        spec = step.spec
        try:
            url, authority = step.url.render(values, step.query)
            headers = [(k.encode(), v.encode()) for k, v in templates.headers(spec.headers, values)]
            content: bytes | None = None
            if spec.form is not None:
                content = templates.form_body(spec.form, values).encode()
                headers = _with_default(headers, b"content-type", b"application/x-www-form-urlencoded")
            elif spec.body is not None:
                content = msgspec.json.encode(templates.json_body(spec.body, values))
                headers = _with_default(headers, b"content-type", b"application/json")
        except MissingValue as exc:
            raise HttpFailure(str(exc), "unconfigured") from None
        except (RenderError, KeyError) as exc:
            raise HttpFailure(f"{spec.method} {spec.url_template}: {exc}", "arguments") from None
        what = What(spec.method, url, hidden)
        check_destination(p.destinations, step.url.scheme, authority)
        if content is not None and len(content) > p.spec.max_request_bytes:
            raise HttpFailure(f"{what}: the request body is {len(content)} bytes; the tool's maxRequestBytes is "
                              f"{p.spec.max_request_bytes}", "too_large")
        client = p.client or self._client(p)
        sent: dict[str, Any] = {"method": spec.method, "url": str(what).partition(" ")[2], "status": None}
        call.sent.append(sent)
        started = time.perf_counter()
        try:
            status, response_headers, body, encoding = await send(client, p.spec, spec.method, url, headers,
                                                                  content, what, deadline, auth)
        finally:
            sent["durationMs"] = round((time.perf_counter() - started) * 1000, 3)
        sent["status"] = status
        if 300 <= status < 400:
            location = shown(response_headers.get("location", "?"), hidden)
            raise HttpFailure(f"{what} answered {status}, a redirect to {location}; this tool does not follow "
                              "redirects (set followRedirects: true and list that host in allowedHosts)",
                              "upstream", {"status": status, "location": location})
        if not 200 <= status < 300:
            raise HttpFailure(f"{what} answered {status} {_reason(status)}", "upstream",
                              {"status": status, "body": results.excerpt(body, encoding)})
        try:
            return results.mapped(body, encoding, spec.response, what)
        except ResultError as exc:
            raise HttpFailure(str(exc), "output") from None

    def _client(self, p: _Prepared) -> Any:
        p.client = make_client(p.spec, p.destinations)
        return p.client


# -- helpers ---------------------------------------------------------------------------------------

def _admit(tool_id: str, p: _Prepared, limit: int) -> None:
    now = time.monotonic()
    while p.calls and p.calls[0] <= now - 60:
        p.calls.popleft()
    if len(p.calls) >= limit:
        wait = 60 - (now - p.calls[0])
        raise HttpFailure(f"the tool {tool_id} is limited to {limit} calls a minute (maxCallsPerMinute); "
                          f"the next call can go in {max(wait, 0.1):.1f} s", "rate_limited")
    p.calls.append(now)


def _query(step: StepSpec) -> list[tuple[Template, Template]]:
    return [(Template(k), Template(v)) for k, vs in step.query.items() for v in (vs if isinstance(vs, list) else [vs])]


def _texts(step: StepSpec) -> list[str]:
    out = [step.url_template, *step.headers.values(), *(step.form or {}).values()]
    out += [v for vs in step.query.values() for v in (vs if isinstance(vs, list) else [vs])]

    def walk(value: Any) -> None:
        if isinstance(value, str):
            out.append(value)
        elif isinstance(value, dict):
            for v in cast("dict[str, Any]", value).values():
                walk(v)
        elif isinstance(value, list):
            for v in cast("list[Any]", value):
                walk(v)

    walk(step.body)
    return out


def _with_default(headers: list[tuple[bytes, bytes]], name: bytes, value: bytes) -> list[tuple[bytes, bytes]]:
    if any(k.lower() == name for k, _ in headers):
        return headers
    return [*headers, (name, value)]


_REASONS = {400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 409: "Conflict",
            422: "Unprocessable Content", 429: "Too Many Requests", 500: "Internal Server Error",
            502: "Bad Gateway", 503: "Service Unavailable", 504: "Gateway Timeout"}


def _reason(status: int) -> str:
    return _REASONS.get(status, "")

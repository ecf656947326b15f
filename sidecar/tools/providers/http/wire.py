"""One request on the wire for the HTTP tools' runner: the client and its pool, retries with
back-off and jitter, Retry-After, the per-request timeout and the response byte cap (see
``runner.py``'s docstring for what each limit does)."""

from __future__ import annotations

import email.utils
import gc
import logging
import random
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import anyio

from .... import secrets
from ....errors import DestinationRefused
from .auth import Authenticator
from .guard import Destinations
from .spec import HttpSpec

if TYPE_CHECKING:
    import httpx2

log = logging.getLogger("sidecar.tools.http")

IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})
BACKOFF_BASE = 0.25  # seconds before the first retry (times 2 each time, then jittered)
BACKOFF_MAX = 8.0
# Connections per tool: more requests wait for one. httpcore2 scans every pooled connection (a
# poll() each) whenever a response ends, so a pool of 100 busy connections stalls the event loop
# for tens of milliseconds; 20 keeps that scan short and still overlaps 20 slow requests.
POOL = 20


class HttpFailure(Exception):
    """The call failed; ``kind`` is the call record's error kind, ``result`` what the error result holds."""

    def __init__(self, message: str, kind: str, result: Any = None) -> None:
        super().__init__(message)
        self.message, self.kind, self.result = message, kind, result


async def send(client: Any, spec: HttpSpec, method: str, url: str, headers: list[tuple[bytes, bytes]],
           content: bytes | None, what: What, deadline: float,
           auth: Authenticator) -> tuple[int, Any, bytes, str]:
    import httpx2  # deferred: a heavy library, never loaded before the first HTTP tool call

    attempt = 0
    refreshed = renewed = False
    while True:
        started = time.perf_counter()
        wait: float | None = None
        try:
            request = client.build_request(method, url, headers=headers, content=content)
            await auth.apply(request)  # after the body is built: an HMAC signs the bytes sent
            request.extensions = {**request.extensions, ORIGIN: request.url.origin}
            with anyio.fail_after(min(spec.timeout, max(deadline - anyio.current_time(), 0.001))):
                response = await client.send(request, stream=True)
                try:
                    status = response.status_code
                    if status == 401 and await auth.refresh_after_401():
                        refreshed = renewed = True  # OAuth2: a new token, sent again once (not a retry)
                    elif status == 401 and renewed:
                        raise HttpFailure(f"{what} answered 401 Unauthorized again with a freshly refreshed OAuth2 "
                                          "token: check the client's scope and its access to this API", "upstream")
                    elif attempt < spec.max_retries and _retryable(method, status):
                        wait = _retry_after(response.headers.get("retry-after"), what, spec.max_retry_wait)
                        log.debug("%s answered %d; retrying", what, status)
                    else:
                        body = await _read(response, spec.max_response_bytes, what)
                        log.debug("%s -> %d, %d bytes in %.1f ms", what, status, len(body),
                                  (time.perf_counter() - started) * 1000)
                        return status, response.headers, body, response.encoding or "utf-8"
                finally:
                    await response.aclose()
        except DestinationRefused as exc:
            raise HttpFailure(exc.message, "refused") from None
        except TimeoutError:
            raise HttpFailure(f"{what} got no complete answer within {spec.timeout:g} s (the tool's timeout)",
                              "timeout") from None
        except httpx2.TimeoutException:
            raise HttpFailure(f"{what} got no complete answer within {spec.timeout:g} s (the tool's timeout)",
                              "timeout") from None
        except (httpx2.ConnectError, httpx2.ReadError, httpx2.WriteError, httpx2.RemoteProtocolError) as exc:
            sent = not isinstance(exc, httpx2.ConnectError)
            reason = _network_reason(exc)
            if attempt >= spec.max_retries or (sent and method not in IDEMPOTENT):
                tries = f" (after {attempt + 1} tries)" if attempt else ""
                raise HttpFailure(f"{what} failed: {reason}{tries}", "upstream") from None
            log.debug("%s failed (%s); retrying", what, reason)
        except httpx2.HTTPError as exc:
            # Anything else httpx2 refuses (a header it will not send, a URL it cannot parse):
            # the call's error, its text scrubbed of the call's secrets by run().
            raise HttpFailure(f"{what} could not be sent: {exc}", "arguments") from None
        if refreshed:
            refreshed = False
            continue
        attempt += 1
        delay = wait if wait is not None else random.uniform(0, min(BACKOFF_MAX, BACKOFF_BASE * 2 ** attempt))
        if anyio.current_time() + delay >= deadline:
            raise HttpFailure(f"{what}: no time left for retry {attempt} within the tool's timeout", "timeout")
        await anyio.sleep(delay)


def make_client(spec: HttpSpec, destinations: Destinations) -> Any:
    import httpx2  # deferred: a heavy library

    limits = httpx2.Limits(max_connections=POOL, max_keepalive_connections=POOL)
    # The guard checks every request the transport sends (each redirect hop too), resolves a name
    # once and connects to the address it checked (no private, loopback, link-local or metadata
    # address unless allowedHosts lists it). trust_env off: a proxy or .netrc from the environment
    # must not redirect or authenticate a tool's calls.
    transport = destinations.transport(limits=limits, trust_env=False, retries=0)
    client = httpx2.AsyncClient(transport=transport, timeout=httpx2.Timeout(spec.timeout),
                                follow_redirects=spec.follow_redirects, trust_env=False, max_redirects=5,
                                event_hooks={"request": [_keep_credentials_home]})
    _freeze_once()
    return client


ORIGIN = "covalt.origin"  # a request's extension: the origin the tool addressed (redirects keep it)
# What a request may carry to another origin; httpx2 itself drops only Authorization there.
NEUTRAL_HEADERS = frozenset({"accept", "accept-encoding", "accept-language", "connection", "content-length",
                             "content-type", "host", "transfer-encoding", "user-agent"})


async def _keep_credentials_home(request: Any) -> None:
    """A redirect to another origin carries none of the tool's own headers: an API key in
    ``X-Api-Key`` or a signature is meant for the host the tool addressed, not for the next one
    (even an allowed one)."""
    origin = request.extensions.get(ORIGIN)
    if origin is not None and request.url.origin != origin:
        for name in [k for k in request.headers if k.lower() not in NEUTRAL_HEADERS]:
            del request.headers[name]


_frozen = False


def _freeze_once() -> None:
    """Move what exists after httpx2's import (the sidecar's modules, httpx2, h11, ssl: about 40k
    objects) out of the collector's reach. A burst of concurrent calls keeps many objects alive
    at once, which triggers full collections; each walked all of those and held the event loop
    25-30 ms on these machines (a ping stalled behind it). Frozen objects are never freed: only
    long-lived ones exist at this point."""
    global _frozen
    if not _frozen:
        _frozen = True
        gc.freeze()


def check_destination(destinations: Destinations, scheme: str, authority: str) -> None:
    """The first, cheap check, before anything is sent: the host by name, against allowedHosts (the
    guard's transport checks it again with the address it resolves to)."""
    parts = urlsplit(f"//{authority}")
    try:
        port = parts.port or (443 if scheme == "https" else 80)
    except ValueError:
        raise HttpFailure(f"{authority!r} has no valid port", "arguments") from None
    try:
        destinations.check_host(parts.hostname or "", port)
    except DestinationRefused as exc:
        raise HttpFailure(exc.message, "refused") from None


def _retryable(method: str, status: int) -> bool:
    if status == 429 or status == 503:
        return True
    return status >= 500 and method in IDEMPOTENT


def _retry_after(value: str | None, what: What, cap: float) -> float | None:
    """The wait a 429/5xx asks for (None: back off as usual); over ``cap`` the call fails now."""
    if not value:
        return None
    value = value.strip()
    seconds: float | None = None
    if value.isdigit():
        seconds = float(value)
    else:
        try:
            when = email.utils.parsedate_to_datetime(value)
            seconds = max(when.timestamp() - time.time(), 0.0)
        except (TypeError, ValueError):
            return None
    if seconds > cap:
        raise HttpFailure(f"{what}: the server asked to retry after {seconds:.0f} s, longer than the tool's "
                          f"maxRetryWait ({cap:g} s); try again later", "rate_limited")
    return seconds


async def _read(response: httpx2.Response, cap: int, what: What) -> bytes:
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > cap:
        raise HttpFailure(f"{what}: the response is {int(declared)} bytes; the tool's maxResponseBytes is {cap}",
                          "too_large")
    body = bytearray()
    async for chunk in response.aiter_bytes():  # decoded: a compressed body counts at its real size
        body += chunk
        if len(body) > cap:
            raise HttpFailure(f"{what}: the response went past the tool's maxResponseBytes ({cap} bytes); "
                              "it was not read further", "too_large")
    return bytes(body)


def _network_reason(exc: Exception) -> str:
    import httpx2  # deferred: a heavy library (already loaded here)

    if isinstance(exc, httpx2.ConnectError):
        return "could not connect"
    if isinstance(exc, httpx2.RemoteProtocolError):
        return "the server closed the connection before the response was complete"
    return "the connection broke"


class What:
    """"GET https://host/path?key=****" for messages and log lines, worked out only when one is
    written (masking a URL costs more than the rest of a call's bookkeeping)."""

    __slots__ = ("hidden", "method", "text", "url")

    def __init__(self, method: str, url: str, hidden: list[str]) -> None:
        self.method, self.url, self.hidden, self.text = method, url, hidden, ""

    def __str__(self) -> str:
        if not self.text:
            self.text = f"{self.method} {shown(self.url, self.hidden)}"
        return self.text

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)


def shown(url: str, hidden: list[str]) -> str:
    return secrets.scrub(secrets.mask_url(url), hidden)

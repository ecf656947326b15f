"""Downloading a toolset bundle from a URL (``toolsets/import {url}``, ``toolsets/checkUpdate``,
``toolsets/upgrade``) without letting the URL, its server or its DNS steer us anywhere else.

The rules, applied to the URL the user gave and again to every redirect hop:

- https only; plain http only to this machine written as such (``127.0.0.1``, ``localhost``,
  ``[::1]``), the rule OAuth endpoints follow (mcp_host/oauth_guard.py ``check_endpoint``). A
  redirect from https to http is refused, and so is one to any other scheme (``file:``, ``ftp:``).
- No user name or password in the URL the user gives, nor in any hop; a credential in its query (a
  signed link) is refused too, since the URL is kept as the toolset's ``sourceRef`` and shown.
- Every address a host resolves to must be public (sidecar/net/addresses.py): a name or a redirect
  that leads to a private, link-local, cloud metadata or loopback address is refused. The one
  exception is loopback when the host is written as this machine in the URL the user gave (a bundle
  served locally, as the tests and the demo do); a redirect cannot earn it.
- Each connection goes to the addresses that were checked, never through a second lookup
  (sidecar/net/pinned.py), so a DNS answer that changes between the check and the connect
  (rebinding) reaches nothing new. Redirects are followed here, by hand, at most ``MAX_REDIRECTS``.
- The body streams to a file: a Content-Length over the limit is refused before any byte is read,
  and the count is kept while reading, so a server that lies or sends no length stops at the limit.
  Connect and each read have timeouts, and the whole download has one.

httpx2 is loaded on the first download (heavy), so this module imports it lazily.
"""

from __future__ import annotations

import hashlib
import logging
import re
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urljoin, urlsplit

import anyio
import anyio.to_thread

from ..errors import DestinationRefused, InvalidBundle, InvalidParams, UpstreamError
from ..net.addresses import classify
from ..net.lookup import Resolver, host_name, is_loopback_name, lookup, resolve_system, resolved_as
from ..secrets import mask_url

if TYPE_CHECKING:
    import ssl

    import httpx2

log = logging.getLogger("sidecar.toolsets.download")

MAX_BUNDLE_BYTES = 256 << 20  # as much as a bundle may hold unpacked (bundle.MAX_TOTAL_BYTES)
MAX_REDIRECTS = 5
MAX_URL_CHARS = 2048
CONNECT_TIMEOUT = 10.0
READ_TIMEOUT = 30.0  # between two reads, not for the whole body
TOTAL_TIMEOUT = 600.0  # the whole download, redirects included (256 MiB at about 450 KB/s)
_SHA256 = re.compile(r"^[0-9a-fA-F]{64}(?![\s\S])")
_REDIRECTS = (301, 302, 303, 307, 308)
_WRITE_BYTES = 1 << 20
_WHAT = "bundle download"  # UpstreamError's source

Progress = Callable[[int, int | None], Awaitable[None]]
"""``(bytes read, bytes expected or None)``, called as the body arrives."""


@dataclass(frozen=True, slots=True)
class Fetched:
    """A bundle on disk, as downloaded: its file, digest and what the server said about its version."""

    path: Path
    sha256: str
    size: int
    etag: str | None
    last_modified: str | None
    content_type: str | None = None


@dataclass(frozen=True, slots=True)
class Validators:
    """What the installed bundle's server said about it, for a conditional GET."""

    etag: str | None = None
    last_modified: str | None = None


def check_url(url: str, field: str = "params.url") -> str:
    """The URL the user gave, checked before anything is sent (InvalidParams naming ``field``)."""
    if len(url) > MAX_URL_CHARS:
        raise InvalidParams(field, f"the URL is longer than {MAX_URL_CHARS} characters")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 -- raises ValueError for a port that is not a number in range
    except ValueError as exc:
        raise InvalidParams(field, f"not a URL ({exc}); give the https:// address of a bundle ZIP") from None
    if parts.scheme.lower() not in ("https", "http") or not parts.hostname:
        raise InvalidParams(field, "give the https:// address of a bundle ZIP (a file on this machine is "
                                   "imported with path)")
    if parts.username is not None or parts.password is not None:
        raise InvalidParams(field, "remove the user name and password from the URL: it is kept and shown as the "
                                   "toolset's source, so it may not carry credentials")
    if mask_url(url) != url:
        raise InvalidParams(field, f"the URL carries what looks like a credential ({mask_url(url)}); it is kept "
                                   "and shown as the toolset's source, so give one without it")
    if parts.scheme.lower() == "http" and not is_loopback_name(parts.hostname):
        raise InvalidParams(field, f"{mask_url(url)} is plain http: bundles are downloaded over https "
                                   "(plain http only from this machine, 127.0.0.1 or localhost)")
    return url


def check_sha256(value: str | None, field: str = "params.sha256") -> str | None:
    if value is None:
        return None
    if _SHA256.match(value) is None:
        raise InvalidParams(field, "a sha256 is 64 hexadecimal digits (what sha256sum prints for the ZIP)")
    return value.lower()


class BundleHosts:
    """The guard of one download (sidecar/net/pinned.py `Guard`): which schemes and addresses its
    requests, redirects included, may reach. ``origin`` is the URL the user gave."""

    def __init__(self, origin: str, resolver: Resolver | None = None) -> None:
        host = urlsplit(origin).hostname or ""
        self._local = host_name(host) if is_loopback_name(host) else None  # the only host loopback is allowed for
        self._resolver = resolver or resolve_system

    def check_url(self, url: httpx2.URL) -> None:
        host = host_name(url.host)
        if url.scheme == "https" or (url.scheme == "http" and host == self._local):
            return
        raise DestinationRefused(
            f"refused {mask_url(str(url))}: bundles are downloaded over https "
            "(plain http only from this machine, when the URL you gave names it)",
            host=host, port=url.port, address=None, reason="scheme", allow=None)

    async def addresses(self, host: str, port: int) -> list[str]:
        found = await lookup(self._resolver, host, port)
        for address in found:
            verdict = classify(address)
            if verdict is None or (verdict.kind == "loopback" and host_name(host) == self._local):
                continue
            raise DestinationRefused(
                f"refused {host_name(host)}:{port}: {resolved_as(host, address, verdict)}; bundles are downloaded "
                "only from public addresses (or from this machine when the URL you gave names it as 127.0.0.1 "
                "or localhost)",
                host=host_name(host), port=port, address=str(address), reason=verdict.kind, allow=None)
        return [str(a) for a in found]


class Downloader:
    """Downloads bundles into ``folder`` (a file each, removed by the caller once installed).
    ``resolver`` and ``verify`` are for tests (a DNS table, a test CA); the defaults are the
    system's."""

    def __init__(self, folder: Path, *, max_bytes: int = MAX_BUNDLE_BYTES, total_timeout: float = TOTAL_TIMEOUT,
                 resolver: Resolver | None = None, verify: ssl.SSLContext | bool = True) -> None:
        self.folder = folder
        self.max_bytes = max_bytes
        self.total_timeout = total_timeout
        self._resolver = resolver
        self._verify = verify

    async def fetch(self, url: str, *, sha256: str | None = None, known: Validators | None = None,
                    on_progress: Progress | None = None) -> Fetched | None:
        """The bundle at ``url`` in a file of ``folder``; None when ``known`` is given and the server
        says it has not changed (304). The caller removes the file."""
        try:
            # The read timeout bounds each wait; this bounds a server that trickles a byte at a time.
            with anyio.fail_after(self.total_timeout):
                return await self._fetch(url, sha256, known, on_progress)
        except TimeoutError:
            raise UpstreamError(_WHAT, f"downloading {mask_url(url)} took longer than {self.total_timeout:g} s; "
                                       "try again later") from None

    async def _fetch(self, url: str, sha256: str | None, known: Validators | None,
                     on_progress: Progress | None) -> Fetched | None:
        import httpx2  # heavy: loaded on the first download

        from ..net.pinned import PinnedTransport

        guard = BundleHosts(url, self._resolver)
        timeout = httpx2.Timeout(READ_TIMEOUT, connect=CONNECT_TIMEOUT)
        # identity: the digest is of the file itself, and the limit counts what is written to disk
        headers = {"Accept": "application/zip, application/octet-stream;q=0.9, */*;q=0.1",
                   "Accept-Encoding": "identity"}
        if known is not None and known.etag:
            headers["If-None-Match"] = known.etag
        if known is not None and known.last_modified:
            headers["If-Modified-Since"] = known.last_modified
        transport = PinnedTransport(guard, log, verify=self._verify)
        async with httpx2.AsyncClient(transport=transport, timeout=timeout, follow_redirects=False,
                                      trust_env=False) as client:
            current = url
            for _hop in range(MAX_REDIRECTS + 1):
                log.debug("bundle: GET %s", mask_url(current))
                try:
                    async with client.stream("GET", current, headers=headers) as response:
                        if response.status_code in _REDIRECTS:
                            current = _next_hop(current, response.headers.get("location"))
                            continue
                        if response.status_code == 304 and known is not None:
                            return None
                        if response.status_code != 200:
                            raise UpstreamError(_WHAT, f"{mask_url(current)} answered {response.status_code} "
                                                       f"{response.reason_phrase}".rstrip())
                        return await self._save(response, current, sha256, on_progress)
                except httpx2.TimeoutException as exc:
                    raise UpstreamError(_WHAT, f"{mask_url(current)} did not answer in time "
                                               f"({type(exc).__name__}); try again later") from None
                except httpx2.HTTPError as exc:
                    raise UpstreamError(_WHAT, f"cannot download {mask_url(current)}: {exc or type(exc).__name__}") \
                        from None
            raise UpstreamError(_WHAT, f"{mask_url(url)} redirected more than {MAX_REDIRECTS} times")

    async def _save(self, response: httpx2.Response, url: str, sha256: str | None,
                    on_progress: Progress | None) -> Fetched:
        declared = _content_length(response)
        if declared is not None and declared > self.max_bytes:
            raise InvalidBundle("", f"{mask_url(url)} is {_size(declared)}; a bundle may be at most "
                                    f"{_size(self.max_bytes)}")
        await anyio.to_thread.run_sync(lambda: self.folder.mkdir(parents=True, exist_ok=True))
        target = self.folder / f"{uuid.uuid4().hex[:16]}.zip"
        digest, size, reported = hashlib.sha256(), 0, 0
        try:
            async with await anyio.open_file(target, "wb") as out:
                pending = bytearray()  # written a MiB at a time: a thread hop per network chunk costs more
                async for chunk in response.aiter_bytes():
                    size += len(chunk)
                    if size > self.max_bytes:
                        raise InvalidBundle("", f"{mask_url(url)} sent more than {_size(self.max_bytes)}; a bundle "
                                                f"may be at most {_size(self.max_bytes)}")
                    digest.update(chunk)
                    pending += chunk
                    if len(pending) >= _WRITE_BYTES:
                        await out.write(bytes(pending))
                        pending.clear()
                    if on_progress is not None and size - reported >= (1 << 18):
                        reported = size
                        await on_progress(size, declared)
                await out.write(bytes(pending))
            got = digest.hexdigest()
            if sha256 is not None and got != sha256:
                raise InvalidParams("params.sha256", f"the bundle downloaded from {mask_url(url)} has sha256 {got}, "
                                                     f"not {sha256}: it is not the file you meant; nothing was "
                                                     "installed")
            if on_progress is not None:
                await on_progress(size, declared)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(lambda: target.unlink(missing_ok=True))
            raise
        return Fetched(target, got, size, response.headers.get("etag"), response.headers.get("last-modified"),
                       response.headers.get("content-type"))


def _next_hop(current: str, location: str | None) -> str:
    """Where a redirect leads, refused unless it is https (or http from http to this machine, which
    the transport's guard decides)."""
    if not location:
        raise UpstreamError(_WHAT, f"{mask_url(current)} redirected without saying where (no Location)")
    target = urljoin(current, location.strip())
    parts = urlsplit(target)
    scheme = parts.scheme.lower()
    where = mask_url(target)
    if scheme not in ("https", "http"):
        raise DestinationRefused(f"refused the redirect from {mask_url(current)} to {where}: only https "
                                 "redirects are followed", host=parts.hostname or "", port=None, address=None,
                                 reason="scheme", allow=None)
    if scheme == "http" and urlsplit(current).scheme.lower() == "https":
        raise DestinationRefused(f"refused the redirect from {mask_url(current)} to {where}: it leaves https for "
                                 "plain http", host=parts.hostname or "", port=None, address=None,
                                 reason="scheme", allow=None)
    if parts.username is not None or parts.password is not None:
        raise DestinationRefused(f"refused the redirect from {mask_url(current)} to {where}: it carries a user "
                                 "name or password", host=parts.hostname or "", port=None, address=None,
                                 reason="credentials", allow=None)
    log.debug("bundle: %s redirects to %s", mask_url(current), where)
    return target


def _content_length(response: httpx2.Response) -> int | None:
    value = response.headers.get("content-length")
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _size(n: int) -> str:
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"

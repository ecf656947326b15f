"""What the providers that call a model API share: how to reach it, and how its failures read.

The official SDKs do the HTTP (their retry honours 429/5xx and ``Retry-After``); this module turns
what they raise into a ``ProviderError`` that tells the user what to fix, and never lets the API key
through: the SDK's own message and traceback are dropped, and anything the server echoes is scrubbed.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Protocol

import anyio
import anyio.to_thread

from ...errors import ProviderError
from ...secrets import MissingVariable, clean, mask_url, resolve, resolve_mapping, scrub, secret_values
from ...secrets.known import remember_all
from .base import ProviderEvent, ToolCallRequest, ToolLimits, TurnRequest

DEFAULT_MAX_RETRIES = 2
# A custom base URL (a local server, a proxy) may need no key, but both SDKs insist on one.
UNUSED_KEY = "unused"


@dataclass(frozen=True)
class Endpoint:
    """One configured provider as its stored settings say; ``${VAR}`` references unresolved until
    the client is made, then read from ``variables`` (the user's secrets, then the environment)."""

    provider_id: str
    base_url: str | None = None
    api_key: str | None = None  # a literal key (from the secret store) or a ${VAR} reference
    default_model: str | None = None
    timeout: float | None = None  # seconds; None: the SDK's default
    max_retries: int = DEFAULT_MAX_RETRIES
    headers: dict[str, str] = field(default_factory=dict)
    variables: Mapping[str, str] = field(default_factory=dict[str, str], repr=False)
    vision: bool | None = None
    """Whether the model takes images (config ``vision``); None: the kind's default."""
    audio: bool = False
    """Whether the model takes audio (config ``audio``): few do (OpenAI's audio models), and one that
    does not refuses the whole request, so only when the user says so."""
    context_window: int | None = None
    """Tokens the model reads (config ``contextWindow``); None: the kind's default."""
    max_tools: int | None = None
    """Tools per request at most (config ``maxTools``); None: the kind's default."""
    tool_search: str | bool | None = None
    """The API's own tool search (config ``toolSearch``: Anthropic's "bm25" or "regex", OpenAI's "hosted";
    false: none); None: the kind's default."""
    api: str | None = None
    """OpenAI only (config ``api``): "chat" (chat completions, the default) or "responses"."""

    @classmethod
    def of(cls, provider_id: str, base_url: str | None, api_key: str | None, default_model: str | None,
           config: dict[str, Any], variables: Mapping[str, str]) -> Endpoint:
        timeout = config.get("timeout")
        return cls(provider_id, base_url, api_key, default_model,
                   float(timeout) if timeout is not None else None,
                   int(config.get("maxRetries", DEFAULT_MAX_RETRIES)), dict(config.get("headers") or {}),
                   variables, config.get("vision"), bool(config.get("audio", False)),
                   config.get("contextWindow"), config.get("maxTools"), config.get("toolSearch"), config.get("api"))

    def resolved(self, env_key: str) -> tuple[str | None, str | None, dict[str, str]]:
        """(base_url, api_key, headers) with ``${VAR}`` resolved now. Without a stored key the SDK's
        own variable (``env_key``, as a secret or in the environment) is the fallback, as the SDK
        would do."""
        try:
            base_url = resolve(self.base_url, self.variables) if self.base_url else None
            key = resolve(self.api_key, self.variables) if self.api_key else self.variables.get(env_key)
            key = key.strip() if key else key  # a pasted newline is not part of a key
            headers = resolve_mapping(self.headers, self.variables)
        except MissingVariable as exc:
            raise ProviderError(f"{exc.name} is not set: store it as a secret (secrets/set) or set it in the "
                                f"environment the app starts from, or change the provider {self.provider_id!r} "
                                "with providers/set") from None
        if not key:
            if not base_url:
                raise ProviderError(f"the provider {self.provider_id!r} has no API key: set apiKey with "
                                    f"providers/set (or {env_key} in the environment)")
            key = UNUSED_KEY
        return base_url, key, headers

    def model_for(self, request: TurnRequest) -> str:
        model = request.model or self.default_model
        if not model:
            raise ProviderError(f"no model to ask: set defaultModel of the provider {self.provider_id!r} "
                                "with providers/set, or name one in the request")
        return model

    def client_options(self, env_key: str) -> dict[str, Any]:
        """Keyword arguments common to ``AsyncOpenAI`` and ``AsyncAnthropic``."""
        base_url, key, headers = self.resolved(env_key)
        options: dict[str, Any] = {"api_key": key, "max_retries": self.max_retries, "default_headers": headers}
        if base_url:
            options["base_url"] = base_url
        if self.timeout is not None:
            options["timeout"] = self.timeout
        return options


class RemoteProvider:
    """A provider behind an official SDK. Subclasses say how to build the client, how to open the
    stream and how to read it; this class owns the client, the error mapping and the closing."""

    kind: str
    sdk_name: str  # the SDK's module, imported on first use: the sidecar starts without it
    env_key: str  # the variable the SDK reads its key from when none is stored

    # The kind's defaults for what config contextWindow, maxTools and toolSearch leave unsaid.
    default_limits: ToolLimits = ToolLimits()

    def __init__(self, endpoint: Endpoint) -> None:
        self.id = endpoint.provider_id
        self.endpoint = endpoint
        d = self.default_limits
        search = endpoint.tool_search
        self.tool_limits = ToolLimits(
            endpoint.context_window or d.context_window,
            endpoint.max_tools if endpoint.max_tools is not None else d.max_tools,
            # A compatible server (a base URL) rarely has the provider's own tool search: said, not assumed.
            (search if isinstance(search, str) else None) if search is not None
            else (d.tool_search if endpoint.base_url is None else None))
        self._client: Any = None
        self._secrets: list[str] = []

    async def stream(self, request: TurnRequest) -> AsyncIterator[ProviderEvent]:
        # The first use imports the SDK (hundreds of ms): in a thread, so other work goes on meanwhile.
        sdk = await anyio.to_thread.run_sync(importlib.import_module, self.sdk_name)
        streaming = False
        try:
            model = self.endpoint.model_for(request)
            parser = self._parser()
            chunks = await self._open(self._connected(), model, request)
            streaming = True
            try:
                async for chunk in chunks:
                    for event in parser.feed(chunk):
                        yield event
            finally:
                # However the iteration ends (done, failed, cancelled, the caller stopped), the HTTP
                # response is closed so the server stops generating; shielded, as a cancelled turn
                # would otherwise cancel the close too.
                with anyio.CancelScope(shield=True):
                    await chunks.close()
            for event in parser.finish():
                yield event
        except Exception as exc:
            error = provider_error(exc, sdk, self.endpoint, self._secrets, streaming=streaming)
            if error is None:
                raise
            # ``from None``: the SDK's exception carries the request, headers and all.
            raise error from None

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None

    def _connected(self) -> Any:
        if self._client is None:
            options = self.endpoint.client_options(self.env_key)
            # A server may echo what it was sent: these never reach a message (UNUSED_KEY is no secret).
            self._secrets = [v for v in (options["api_key"], *options["default_headers"].values()) if v != UNUSED_KEY]
            self._secrets += secret_values(url=options.get("base_url"))  # a token in the path or query
            remember_all(self._secrets)  # ... nor a log line, whichever library writes it
            self._client = self._new_client(options)
        return self._client

    def _new_client(self, options: dict[str, Any]) -> Any:
        raise NotImplementedError

    async def _open(self, client: Any, model: str, request: TurnRequest) -> Any:
        """The SDK's stream for one call: an async iterator of chunks with an async ``close()``."""
        raise NotImplementedError

    def _parser(self) -> StreamParser:
        raise NotImplementedError


class StreamParser(Protocol):
    """Reads one call's chunks. ``finish`` runs when the stream has ended without an error."""

    def feed(self, chunk: Any, /) -> Iterable[ProviderEvent]: ...

    def finish(self) -> Iterable[ProviderEvent]: ...


def provider_error(exc: BaseException, sdk: ModuleType, endpoint: Endpoint, secrets: list[str], *,
                   streaming: bool) -> ProviderError | None:
    """``exc`` as a ProviderError when it is a failure of the API or of the connection to it;
    None for anything else (a bug, which should surface as itself). ``streaming``: the response had
    begun, so a broken connection cut an answer rather than failing to connect."""
    import httpx2  # httpx: heavy, and loaded with the SDK anyway by the time anything fails

    if isinstance(exc, ProviderError):
        return exc
    err: Any = exc  # the SDK's classes are only known at run time: so are their fields
    if isinstance(exc, sdk.APIStatusError) and err.status_code != 200:  # 200: an error event, below
        return _status_error(err.status_code, clean(scrub(_detail(err.body, err.message), secrets)), endpoint)
    if isinstance(exc, sdk.APITimeoutError):
        limit = f"{endpoint.timeout:g}s" if endpoint.timeout is not None else "the time limit"
        return ProviderError(f"the provider gave no answer within {limit}: try again, or raise config.timeout "
                             "with providers/set", retryable=True)
    if isinstance(exc, sdk.APIConnectionError | httpx2.TransportError):
        cause = clean(scrub(str(exc.__cause__ or exc), secrets))
        if streaming:
            return ProviderError(f"the connection was cut mid-answer ({cause}): try again", retryable=True)
        return ProviderError(f"cannot reach {_where(endpoint)} ({cause}): check baseUrl and the network",
                             retryable=True)
    if isinstance(exc, sdk.APIError):  # an error event in a stream that had begun well (e.g. overloaded)
        return ProviderError(f"the provider failed mid-answer: {clean(scrub(_detail(err.body, err.message), secrets))}",
                             retryable=True)
    return None


def _status_error(status: int, detail: str, endpoint: Endpoint) -> ProviderError:
    if status == 401:  # the server's text may quote part of the key: leave it out
        return ProviderError("the API key was refused (HTTP 401): set it with providers/set", status=401)
    if status == 403:
        return ProviderError(f"access denied (HTTP 403): {detail}; check what the API key may use", status=403)
    if status == 404:
        return ProviderError(f"not found (HTTP 404): {detail}; check the model name and baseUrl", status=404)
    if status == 429:
        return ProviderError(f"rate limited (HTTP 429) after {endpoint.max_retries} retries: {detail}; wait and "
                             "try again, or raise config.maxRetries", status=429, retryable=True)
    if status >= 500 or status == 408:
        return ProviderError(f"the provider failed (HTTP {status}): {detail}; try again later", status=status,
                             retryable=True)
    return ProviderError(f"the provider rejected the request (HTTP {status}): {detail}", status=status)


def _detail(body: object, fallback: str) -> str:
    """The server's own words: ``{"error": {"type": ..., "message": ...}}`` in both APIs' errors
    (the openai SDK hands over just the inner object for an error inside a stream)."""
    error = body.get("error", body) if isinstance(body, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        kind = error.get("type")
        return f"{kind}: {error['message']}" if isinstance(kind, str) and kind else error["message"]
    if isinstance(body, str) and body.strip():
        return body.strip()[:500]
    return fallback


def _where(endpoint: Endpoint) -> str:

    return mask_url(endpoint.base_url) if endpoint.base_url else "the provider's API"


def parse_arguments(text: str) -> dict[str, Any] | None:
    """A tool call's argument text as the object it should be; None when it is not one. No text at
    all means no arguments (both APIs send that for a tool without parameters)."""
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


class ToolCallBuffer:
    """Tool calls whose id, name and argument text arrive in pieces, keyed by the stream's index."""

    def __init__(self) -> None:
        self._calls: dict[int, list[str]] = {}  # index -> [id, name, argument text so far]

    def add(self, index: int, id: str | None = None, name: str | None = None, fragment: str | None = None) -> None:
        call = self._calls.setdefault(index, ["", "", ""])
        if id:
            call[0] = id
        if name and not call[1]:
            call[1] = name
        if fragment:
            call[2] += fragment

    def __bool__(self) -> bool:
        return bool(self._calls)

    def pop(self, index: int) -> ToolCallRequest | None:
        call = self._calls.pop(index, None)
        if call is None:
            return None
        id, name, text = call
        return ToolCallRequest(id=id or f"call_{index}", name=name, arguments=parse_arguments(text),
                               raw_arguments=text)

    def drain(self) -> list[ToolCallRequest]:
        """Every call still buffered, in index order."""
        return [call for index in sorted(self._calls) if (call := self.pop(index)) is not None]

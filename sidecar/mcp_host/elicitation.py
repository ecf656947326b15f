"""A server asking the user (MCP elicitation, form or URL mode), and the answer going back to it.

Where an elicitation comes from: the client side of MCP has no sure link from a server's request
to the request of ours it serves (stdio carries none), so it is the request in flight on that
server when the server asks. When exactly one is in flight, its `CallOrigin` is the source; when
several are, only a chat they all share is named.

A URL-mode request whose URL is not http(s) with a host (``javascript:``, ``file:``, ...) never
reaches the UI: it is logged and the server gets ``decline``.

An answer that does not fit the form the server asked for is not passed on: the server gets
``cancel`` (re-asking is not possible in MCP, and an error response would blame the server), and
the request that caused the elicitation fails with `McpError` kind ``elicitation`` saying what
did not fit, so the UI learns it from the call's result instead of a silent cancel.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

from .state import CallOrigin, LiveServer, Pending

if TYPE_CHECKING:
    from mcp.client.session import ClientRequestContext
    from mcp_types import ElicitRequestParams, ElicitResult, ErrorData

log = logging.getLogger("sidecar.mcp_host")

ElicitAction = Literal["accept", "decline", "cancel"]


@dataclass(frozen=True)
class Elicitation:
    """What a server asks the user, and on behalf of which request."""

    key: str
    """The asking server's key (``toolset~server``)."""
    mode: Literal["form", "url"]
    message: str
    requested_schema: dict[str, Any] | None = None
    """Form mode: the flat JSON Schema the answer's content must fit."""
    url: str | None = None
    """URL mode: the page the user is asked to open (out of band; nothing comes back through us)."""
    elicitation_id: str | None = None
    """URL mode: the server's id for this elicitation (it may later say it completed)."""
    origin: CallOrigin | None = None
    """The request in flight on that server when it asked, when there is exactly one."""
    chat_id: str | None = None
    """The chat of the requests in flight on that server, when they share one."""


@dataclass(frozen=True)
class ElicitAnswer:
    action: ElicitAction
    content: dict[str, Any] | None = None


Elicit = Callable[[Elicitation], Awaitable[ElicitAnswer]]


class InvalidAnswer(Exception):
    """The user's answer to an elicitation is malformed; `str()` says how."""


def source_of(srv: LiveServer) -> tuple[Pending | None, str | None]:
    """The request an elicitation of this server belongs to (when sure), and the chat of all of them."""
    pending = list(srv.pending)
    chats = {p.origin.chat_id if p.origin is not None else None for p in pending}
    chat_id = next(iter(chats)) if len(chats) == 1 else None
    return (pending[0] if len(pending) == 1 else None), chat_id


def is_web_url(url: str) -> bool:
    """Whether a URL-mode elicitation's page is one the UI may offer to open: http(s) with a host."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    return parts.scheme.lower() in ("http", "https") and bool(parts.hostname)


def check_answer(answer: ElicitAnswer, request: Elicitation) -> None:
    """Raise `InvalidAnswer` when an accepted form answer does not fit the requested schema."""
    if request.mode != "form" or answer.action != "accept":
        return
    if answer.content is None:
        raise InvalidAnswer("the answer accepts the form but has no content")
    from jsonschema import validators  # loaded with the SDK, on first connect
    from jsonschema.exceptions import SchemaError, best_match

    schema = request.requested_schema or {"type": "object"}
    cls = validators.validator_for(schema, default=validators.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except SchemaError:
        return  # the server's form is broken; let it judge the answer itself
    error = best_match(cls(schema).iter_errors(answer.content))
    if error is not None:
        where = "content" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
        raise InvalidAnswer(f"{where}: {error.message}")


def elicitation_callback(srv: LiveServer, elicit: Elicit) -> Any:
    """The SDK's elicitation callback for one server's session."""
    import mcp_types as types  # mcp SDK: this runs once a connection is being made

    async def on_elicit(context: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult | ErrorData:
        pending, chat_id = source_of(srv)
        if isinstance(params, types.ElicitRequestURLParams):
            if not is_web_url(params.url):
                log.warning("MCP server %s asked the user to open %r, which is not an http(s) URL: declined",
                            srv.label, params.url[:200])
                return types.ElicitResult(action="decline")
            request = Elicitation(key=srv.config.key, mode="url", message=params.message, url=params.url,
                                  elicitation_id=params.elicitation_id, chat_id=chat_id,
                                  origin=pending.origin if pending is not None else None)
        else:
            request = Elicitation(key=srv.config.key, mode="form", message=params.message,
                                  requested_schema=params.requested_schema, chat_id=chat_id,
                                  origin=pending.origin if pending is not None else None)
        srv.elicits += 1
        for p in srv.pending:
            p.clock.pause()
        try:
            try:
                answer = await elicit(request)
                check_answer(answer, request)
                return types.ElicitResult.model_validate({"action": answer.action, "content": answer.content})
            except InvalidAnswer as exc:
                reason = str(exc)
            except ValueError as exc:  # pydantic's ValidationError: content values MCP does not allow
                reason = f"content: {exc}"
            log.warning("MCP server %s: the answer to its elicitation does not fit its form (%s): "
                        "cancelled", srv.label, reason)
            if pending is not None:
                pending.refused_answer = reason
            return types.ElicitResult(action="cancel")
        except Exception as exc:
            log.warning("MCP server %s: elicitation failed: %r", srv.label, exc)
            return types.ErrorData(code=types.INTERNAL_ERROR, message="the client could not answer the elicitation")
        finally:
            srv.elicits -= 1
            for p in srv.pending:
                p.clock.resume()

    return on_elicit

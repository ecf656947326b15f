"""The JSON-RPC envelope: one decode per line (params kept as ``Raw`` for the method's own typed
decoder), and the bytes of everything we send."""

from __future__ import annotations

from typing import Any, TypeGuard

import msgspec

from .errors import INVALID_REQUEST, PARSE_ERROR, RpcError

UNSET = msgspec.UNSET
_encoder = msgspec.json.Encoder()
encode = _encoder.encode


class Envelope(msgspec.Struct):
    # Loosely typed on purpose: a bad id or version must still let us answer with the right code
    # (and with the id, when it is usable), which a strict decode would not.
    jsonrpc: Any = UNSET
    id: Any = UNSET
    method: Any = UNSET
    params: msgspec.Raw = msgspec.Raw()
    result: msgspec.Raw = msgspec.Raw()
    error: Any = UNSET


class ErrorObject(msgspec.Struct):
    code: int
    message: str
    data: Any = None


class CancelParams(msgspec.Struct):
    id: int | str


_decode_envelope = msgspec.json.Decoder(Envelope).decode
_decode_raw = msgspec.json.Decoder(msgspec.Raw).decode  # checks syntax, builds nothing
decode_cancel = msgspec.json.Decoder(CancelParams).decode

TOO_DEEP = "parse error: the JSON is nested deeper than this parser goes (about 1000 levels)"


def decode_line(line: bytes | bytearray) -> Envelope:
    """The envelope of one line, or an ``RpcError`` to answer with id null: ParseError when the
    line is not JSON we can read, InvalidRequest when it is JSON but not an object.

    Nesting too deep for the parser is a ParseError: the JSON-RPC spec's "an error occurred on the
    server while parsing the JSON text", and the id can't be read from a line that wasn't parsed.
    """
    if not line.isascii():
        # msgspec skips what it doesn't keep (``Raw`` params, unknown fields) without decoding its
        # strings, so invalid UTF-8 there would pass: check the whole line. ASCII, the usual
        # case, needs no check.
        try:
            line.decode()
        except UnicodeDecodeError as exc:
            raise RpcError(PARSE_ERROR, f"parse error: invalid UTF-8 at byte {exc.start}") from None
    try:
        return _decode_envelope(line)
    except msgspec.ValidationError:
        pass  # not an object (the only way an envelope of ``Any`` fields fails to validate)
    except msgspec.DecodeError as exc:
        raise RpcError(PARSE_ERROR, f"parse error: {exc}") from None
    except RecursionError:
        raise RpcError(PARSE_ERROR, TOO_DEEP) from None
    # The decoder stopped at the first token: whether the rest is JSON decides the code
    # (``[[[[`` is a parse error, not a batch).
    try:
        top = _decode_raw(line)
    except msgspec.DecodeError as exc:
        raise RpcError(PARSE_ERROR, f"parse error: {exc}") from None
    except RecursionError:
        raise RpcError(PARSE_ERROR, TOO_DEEP) from None
    if bytes(memoryview(top)[:1]) == b"[":
        raise RpcError(INVALID_REQUEST, "batch requests are not supported: send one JSON object per line")
    raise RpcError(INVALID_REQUEST, "a JSON-RPC message must be a JSON object")


def is_valid_id(value: object) -> TypeGuard[int | str]:
    t = type(value)  # not isinstance: a bool is an int, and not an id
    return t is int or t is str


def validation_data(exc: msgspec.ValidationError) -> dict[str, str]:
    """``{path, reason}`` of a params decode error: ``params.ms``, ``Expected `int`, got `str```."""
    text = str(exc)
    reason, sep, where = text.rpartition(" - at `")
    if not sep:
        return {"path": "params", "reason": text}
    path = where.rstrip("`")
    key, sep, mapping = path.partition("` in `")
    if sep and key == "key":  # a mapping's key is wrong: msgspec says "at `key` in `$.env`"
        return {"path": "params" + mapping[1:], "reason": f"{reason} (a key)"}
    return {"path": "params" + path[1:], "reason": reason}


class Verbatim:
    """JSON that is already bytes (a tool's result as its worker wrote it), for a value inside a
    result. ``response`` sends a big one as a part of its own, never copied into the message:
    copying 15 MB costs the event loop milliseconds (and page faults) while pings wait."""

    __slots__ = ("raw",)

    def __init__(self, raw: msgspec.Raw) -> None:
        self.raw = raw


# One line in parts, written back to back with nothing in between (see ``Outbox``).
Parts = list[bytes | bytearray | memoryview]

SPLICE_BYTES = 1 << 16  # a smaller Verbatim is copied into its message like any value
# In place of each big Verbatim while the rest is encoded: a raw NUL byte is never in JSON that
# msgspec writes (it escapes control characters in strings), and never in a checked Raw.
_MARK = msgspec.Raw(b"\x00")
_spliced: list[msgspec.Raw] = []


def _splice(value: Any) -> Any:
    if isinstance(value, Verbatim):
        if len(value.raw) < SPLICE_BYTES:
            return value.raw
        _spliced.append(value.raw)
        return _MARK
    raise TypeError(f"Encoding objects of type {type(value).__name__} is unsupported")


_splicing_encoder = msgspec.json.Encoder(enc_hook=_splice)


def response(request_id: int | str | None, result: Any) -> bytearray | Parts:
    """The answer to a request: one buffer, or parts when the result holds a big ``Verbatim``."""
    message = bytearray(b'{"jsonrpc":"2.0","id":%s,"result":' % encode(request_id))
    _spliced.clear()
    try:
        _splicing_encoder.encode_into(result, message, -1)
        if not _spliced:
            message += b"}\n"
            return message
        raws = list(_spliced)
    finally:
        _spliced.clear()
    message += b"}\n"
    pieces = bytes(message).split(b"\x00")
    parts: Parts = [pieces[0]]
    for raw, piece in zip(raws, pieces[1:], strict=True):
        parts += (memoryview(raw), piece)
    return parts


def error(request_id: int | str | None, code: int, message: str, data: Any = None) -> bytes:
    err: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        err["data"] = data
    return b'{"jsonrpc":"2.0","id":%s,"error":%s}\n' % (encode(request_id), encode(err))


def notification(method: str, params: Any = None) -> bytes:
    if params is None:
        return b'{"jsonrpc":"2.0","method":%s}\n' % encode(method)
    return b'{"jsonrpc":"2.0","method":%s,"params":%s}\n' % (encode(method), encode(params))


def request(request_id: str, method: str, params: Any = None) -> bytes:
    body = b"" if params is None else b',"params":%s' % encode(params)
    return b'{"jsonrpc":"2.0","id":%s,"method":%s%s}\n' % (encode(request_id), encode(method), body)

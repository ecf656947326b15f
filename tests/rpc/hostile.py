"""Hostile NDJSON lines for the engine, and how many answers each one deserves.

The lines are mutations of well-formed messages (flipped bytes, invalid UTF-8, truncation, deep
nesting, stray punctuation), generated from a seed so a failure can be replayed.
"""

from __future__ import annotations

import json
import random

TEMPLATES = [
    b'{"jsonrpc":"2.0","id":1,"method":"ping"}',
    b'{"jsonrpc":"2.0","id":"a-7","method":"ping",'
    b'"params":{"text":"h\xc3\xa9llo \xe2\x9c\x93","n":[1,2.5,{"x":null}]}}',
    b'{"jsonrpc":"2.0","id":3,"method":"typed","params":{"ms":5}}',
    b'{"jsonrpc":"2.0","method":"note","params":{}}',
    b'{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":1}}',
    b'{"jsonrpc":"2.0","id":"s1","result":{"ok":true}}',
    b'{"jsonrpc":"2.0","id":"s2","error":{"code":-32012,"message":"no"}}',
    b'[{"jsonrpc":"2.0","id":1,"method":"ping"}]',
]

# Invalid UTF-8: a lone continuation byte, a truncated sequence, an encoded surrogate, an overlong
# slash, bytes that never occur in UTF-8.
BAD_UTF8 = [b"\x80", b"\xc3", b"\xe2\x9c", b"\xed\xa0\x80", b"\xc0\xaf", b"\xff", b"\xfe\xff"]
PUNCTUATION = b'{}[]",:\\ 0-eE.tfn'


def _deep(rng: random.Random) -> bytes:
    # Either far below or far above what a recursive parser allows (about 1000 levels): the two
    # parsers compared here (msgspec in the engine, json in the test) sit at different stack depths.
    depth = rng.choice([rng.randint(1, 400), rng.randint(1500, 20000)])
    opener, closer = rng.choice([(b"[", b"]"), (b'{"k":', b"}")])
    value = opener * depth + (b"1" if opener == b'{"k":' else b"") + closer * depth
    if rng.random() < 0.3:
        value = value[: rng.randint(0, len(value))]  # unclosed
    where = rng.choice(["params", "unknown", "id", "top"])
    if where == "top":
        return value
    if where == "params":
        return b'{"jsonrpc":"2.0","id":9,"method":"ping","params":{"x":' + value + b"}}"
    if where == "id":
        return b'{"jsonrpc":"2.0","method":"ping","id":' + value + b"}"
    return b'{"jsonrpc":"2.0","id":9,"method":"ping","junk":' + value + b"}"


def _mutate(line: bytes, rng: random.Random) -> bytes:
    data = bytearray(line)
    for _ in range(rng.randint(1, 3)):
        pos = rng.randint(0, len(data))
        kind = rng.randrange(6)
        if kind == 0 and data:
            data[min(pos, len(data) - 1)] = rng.randrange(256)
        elif kind == 1:
            data[pos:pos] = rng.choice(BAD_UTF8)
        elif kind == 2:
            del data[pos:]
        elif kind == 3:
            data[pos:pos] = bytes([rng.choice(PUNCTUATION)])
        elif kind == 4 and data:
            start = rng.randint(0, len(data) - 1)
            data[pos:pos] = data[start : start + rng.randint(1, 12)]
        else:
            data[pos:pos] = rng.choice([b'"\xff"', b'"\\ud800"', b"NaN", b"1e400", b'"\x01"'])
    return bytes(data)


def hostile_lines(seed: int, count: int) -> list[bytes]:
    rng = random.Random(seed)
    out: list[bytes] = []
    while len(out) < count:
        roll = rng.random()
        if roll < 0.15:
            line = _deep(rng)
        elif roll < 0.2:
            line = rng.choice([b"[" * rng.randint(1, 50), b"{" * rng.randint(1, 50), b'{"a":' * 30])
        else:
            line = _mutate(rng.choice(TEMPLATES), rng)
        line = line.replace(b"\n", b" ")  # one line each: a newline would make it two
        if line.endswith(b"\r"):
            line = line[:-1]
        if line.strip():
            out.append(line)
    return out


def _no_constants(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


def answers_due(line: bytes) -> set[int]:
    """How many answers the line may get: a request (or anything unreadable) exactly one; a
    notification or a response none, or one when the engine can't read it as such."""
    try:
        message = json.loads(line.decode("utf-8"), parse_constant=_no_constants)
    except (ValueError, RecursionError):
        return {1}
    if not isinstance(message, dict):
        return {1}
    if "method" in message and "id" not in message:
        return {0, 1}
    if "method" not in message and ("result" in message or "error" in message):
        return {0, 1}
    return {1}

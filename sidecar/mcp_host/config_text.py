"""Reading another app's config file safely: bounded, regular files only, and parsed as the app
writes it (JSON, JSON with comments and trailing commas as VS Code and Zed write it, small JSON5, or
goose's YAML). Every refusal is a `ConfigError` whose message says what is wrong with the file."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Any

import msgspec

# These files hold a few servers (KiBs); a MiB is far beyond any real one and keeps the time
# spent on a hostile one small.
MAX_CONFIG_BYTES = 1 << 20
# Claude Code's ~/.claude.json also keeps per-project state and grows to several MiB on a machine
# used for months; it is plain JSON (msgspec reads 16 MiB in well under a second).
MAX_STATE_BYTES = 16 << 20
MAX_CONFIG_DEPTH = 64  # real configs nest 4-6 levels (servers, one server, its env)
# json5 is pure Python and recursive (about a second per 100 KiB): only the fallback for small
# files that JSON with comments does not cover (unquoted keys, single quotes).
MAX_JSON5_BYTES = 64 << 10

# JSON5 ends a line comment at CR, U+2028 and U+2029 too: stopping only at LF would hide from the
# nesting count the brackets json5 then reads.
_LINE_COMMENT = r"//[^\n\r\u2028\u2029]*"
_BLOCK_COMMENT = r"/\*[\s\S]*?\*/"
_STRING = r'"(?:[^"\\\n]|\\.)*"'
# JSONC tokens that matter for removing comments and trailing commas: strings (kept whole),
# comments (dropped), and commas before a closing bracket (dropped).
_JSONC = re.compile(rf"{_STRING}|{_LINE_COMMENT}|{_BLOCK_COMMENT}"
                    rf"|,(?=(?:\s|{_LINE_COMMENT}|{_BLOCK_COMMENT})*[}}\]])")
_NESTING = re.compile(rf"{_STRING}|'(?:[^'\\\n]|\\.)*'|{_LINE_COMMENT}|{_BLOCK_COMMENT}|[\[{{]|[\]}}]")


class ConfigError(ValueError):
    pass


def read_text(path: Path, limit: int = MAX_CONFIG_BYTES) -> str:
    """The file's text, if it is a regular file within `limit` bytes (never more is read). Opened
    non-blocking and checked with fstat: a FIFO put at the path would otherwise hold the thread
    until written to."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise ConfigError(f"cannot be read: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError("is not a regular file; give the path of an MCP config (.json)")
        if info.st_size > limit:  # said before reading a byte of it
            raise ConfigError(f"is larger than {_size(limit)} ({_size(info.st_size)}); not an MCP config")
        os.set_blocking(fd, True)
        raw = f.read(limit + 1)
    if len(raw) > limit:  # grew while being read
        raise ConfigError(f"is larger than {_size(limit)}; not an MCP config")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"is not UTF-8 text: {exc.reason} at byte {exc.start}") from None


def _size(n: int) -> str:
    return f"{n / (1 << 20):.0f} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"


def parse(text: str) -> Any:
    """JSON, JSON with comments and trailing commas (VS Code's and Zed's), or small JSON5; nesting
    beyond MAX_CONFIG_DEPTH is refused before any parser (all recursive) sees the text."""
    _check_depth(text)
    plain = _JSONC.sub(lambda m: m[0] if m[0][0] == '"' else "", text)
    try:
        return msgspec.json.decode(plain)
    except msgspec.DecodeError as exc:
        problem = str(exc)
    except RecursionError:  # deeper than the count saw: still a refusal, never -32603
        raise _too_deep() from None
    if len(text.encode()) > MAX_JSON5_BYTES:
        raise ConfigError(f"is not valid JSON: {problem}")
    import json5  # a pure-Python parser of the rest of JSON5 (unquoted keys, single quotes)

    try:
        return json5.loads(text)
    except ValueError:
        raise ConfigError(f"is not valid JSON: {problem}") from None
    except RecursionError:
        raise _too_deep() from None


def parse_plain(text: str, type_: Any) -> Any:
    """Strict JSON into `type_` (what msgspec skips costs no Python objects): for a big file an app
    writes itself with JSON.stringify, such as ~/.claude.json."""
    try:
        return msgspec.json.decode(text, type=type_)
    except msgspec.ValidationError as exc:
        raise ConfigError(f"does not have the shape expected: {exc}") from None
    except msgspec.DecodeError as exc:
        raise ConfigError(f"is not valid JSON: {exc}") from None
    except RecursionError:
        raise _too_deep() from None


def parse_yaml(text: str) -> Any:
    """goose's config.yaml. Safe loading only (no tags that build objects); an alias bomb stays a
    few shared objects, and only the extensions are walked."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    _check_depth(text, yaml=True)
    try:
        return yaml.load(text, Loader=loader)  # noqa: S506 - a safe loader
    except RecursionError:
        raise _too_deep() from None
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        line = f" (line {where.line + 1})" if where is not None else ""
        raise ConfigError(f"is not valid YAML{line}: {getattr(exc, 'problem', None) or exc}") from None


def _check_depth(text: str, *, yaml: bool = False) -> None:
    depth = 0
    tokens = re.finditer(r"[\[{]|[\]}]", text) if yaml else _NESTING.finditer(text)
    for token in tokens:
        first = token[0][0]
        if first in "[{":
            depth += 1
            if depth > MAX_CONFIG_DEPTH:
                line = text.count("\n", 0, token.start()) + 1
                raise ConfigError(f"is nested more than {MAX_CONFIG_DEPTH} levels deep (line {line}); "
                                  "not an MCP config")
        elif first in "]}":
            depth = max(depth - 1, 0)


def _too_deep() -> ConfigError:
    return ConfigError(f"is nested more than {MAX_CONFIG_DEPTH} levels deep; not an MCP config")

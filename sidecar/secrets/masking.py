"""Secrets never leave the sidecar in clear: the one place that says how they are shown.

Responses and error messages mask them (``mask*``, ``masked_key``, ``clean``); log lines pass
``clean`` in the log filter (``sidecar/logs.py``); exports turn them into ``${VAR}`` placeholders
(``placeholder*``). A ``${VAR}`` reference is not a secret and shows as is (so does ``Bearer ${TOKEN}``).

What is a secret is decided by meaning, so that what a user needs to read stays readable
(``LOG_LEVEL=debug``, ``MEMORY_FILE_PATH``, an ``X-Team`` header, ``?mode=fast``):

- a named value (env var, header, query parameter, ``--flag``, ``KEY=value``) is hidden when its
  name says it is secret (``shapes.looks_secret_name``: token, key, secret, password, auth, sig,
  code...) OR its value looks like a credential (``shapes.looks_like_credential``: a vendor prefix
  such as ``sk-``/``ghp_``/``xoxb-``/``AKIA``, a JWT, a long high-entropy run that is not words);
- a header given as an argument (``--header``/``-H "Authorization: Bearer X"``) is a named value,
  and keeps its scheme word: ``Authorization: Bearer ****``;
- in a URL: the userinfo (``user:password@``), query values by the rule above, a path segment that
  looks like a credential (``/v1/<token>/``; ordinary words and dates stay), and every fragment value
  (``#access_token=``: fragments carry tokens and nothing a reader needs);
- in free text (a stderr tail, an exception, a log line): every value the process knows is secret
  (``known``), then URLs, ``Authorization:``/``Bearer`` values, secret flags' values, ``KEY=value`` and
  ``"key": "value"`` pairs with a secret name, and words with a vendor prefix or a JWT shape.

Exports write a value that came from the secret store as the ``${NAME}`` it is stored under, and
name each other placeholder after its key; a second, different secret under a name already used
gets a distinct name (``${TOKEN_2}``), so importing and setting the variables restores both.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any
from urllib.parse import unquote, unquote_plus, urlsplit, urlunsplit

import msgspec

from .known import scrub_known
from .shapes import looks_like_credential, looks_secret_name
from .variables import is_reference

MASK = "****"
_REF = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*\}")
_SCHEME_WORDS = {"bearer", "basic", "token", "bot", "digest", "apikey"}


def scrub(text: str, values: Iterable[str], shown: Callable[[str], str] = lambda _: MASK) -> str:
    """`text` with every known secret value in it replaced by ``shown(value)`` (default: masked).

    A peer may echo what it was sent (a key, a header, a token-bearing URL). Values shorter than 4
    characters are left alone: they would mask ordinary words. Longer values go first, so a value
    that contains another is replaced whole.
    """
    for value in sorted({v for v in values if len(v) >= 4}, key=len, reverse=True):
        text = text.replace(value, shown(value))
    return text


def scrub_json(result: Any, values: Iterable[str]) -> Any:
    """A tool's result (any JSON value, or its JSON as ``msgspec.Raw``) with every secret value in it
    masked, as `scrub` does for text: the values are replaced in the result's JSON, as JSON spells
    them. The result itself when nothing was in it."""
    wanted = sorted({v for v in values if len(v) >= 4}, key=len, reverse=True)
    if not wanted or result is None:
        return result
    data = bytes(result) if isinstance(result, msgspec.Raw) else msgspec.json.encode(result)
    masked = data
    for value in wanted:
        masked = masked.replace(msgspec.json.encode(value)[1:-1], MASK.encode())
    if masked == data:
        return result
    return msgspec.Raw(masked) if isinstance(result, msgspec.Raw) else msgspec.json.decode(masked)


def refers(value: str) -> bool:
    """A reference, possibly behind a scheme word (``Bearer ${TOKEN}``): nothing secret to hide."""
    if is_reference(value):
        return True
    if "${" not in value:
        return False
    rest = _REF.sub(" ", value).split()
    return len(rest) < len(value.split()) and all(w.lower() in _SCHEME_WORDS for w in rest)


def mask(value: str) -> str:
    """A ``${VAR}`` reference is not a secret; any literal value is shown masked."""
    return value if refers(value) else MASK


Replace = Callable[[str, str], str]  # (name the value is known by, value) -> shown value


def _masked(name: str, value: str) -> str:
    return mask(value)


class Placeholders:
    """``${NAME}`` placeholders for one export (or for the secrets given with one MCP server): named
    after the key a value is first met under, one name per distinct value (the same key two secrets:
    ``API_KEY`` and ``API_KEY_2``; one secret under two keys: one name). ``prefix`` (a server's id) is put before a name
    that does not already start with it: ``API_KEY`` of server ``weather`` is ``WEATHER_API_KEY``."""

    def __init__(self, reserved: Iterable[str] = (), prefix: str = "") -> None:
        # placeholder name -> the value it stands for; `reserved`: names the export already refers to
        # (``${SEARCH_API_KEY}``), which a literal must not take over, as they mean another value.
        self._values: dict[str, str | None] = dict.fromkeys(reserved)
        self._prefix = _name_part(prefix)

    @property
    def prefix(self) -> str:
        """What a name made here starts with (``WEATHER``), followed by ``_``; empty when none."""
        return self._prefix

    def __call__(self, name: str, value: str) -> str:
        if refers(value):
            return value
        for given, held in self._values.items():  # one secret in several places: asked for once
            if held == value:
                return "${" + given + "}"
        base = _name_part(name) or "SECRET"
        if self._prefix and not base.startswith(self._prefix + "_"):
            base = f"{self._prefix}_{base}"
        if base[0].isdigit():
            base = "_" + base
        # A name the user can set (secrets/set takes at most 128 characters), room left for "_<n>".
        base = base[:120]
        candidate, n = base, 1
        while self._values.get(candidate, value) != value:
            n += 1
            candidate = f"{base}_{n}"
        self._values[candidate] = value
        return "${" + candidate + "}"

    def allocated(self) -> dict[str, str]:
        """The names given out so far, with the value each stands for."""
        return {k: v for k, v in self._values.items() if v is not None}


def _name_part(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_").upper()


def _with_scheme(name: str, value: str, replace: Replace) -> str:
    """``Bearer X`` -> ``Bearer <shown X>``: the scheme word says how the header is used."""
    scheme, space, rest = value.partition(" ")
    if space and rest.strip() and scheme.lower() in _SCHEME_WORDS:
        return f"{scheme} {replace(name, rest.strip())}"
    return replace(name, value)


def _show_named(name: str, value: str, replace: Replace) -> str:
    """A value known by a name (env var, header, query, flag): hidden by its name or its shape."""
    if not value or refers(value):
        return value
    if looks_secret_name(name) or looks_like_credential(value):
        return _with_scheme(name, value, replace)
    if "://" in value:
        return _show_free(name, value, replace)
    return value


def _show_free(name: str, value: str, replace: Replace) -> str:
    """A value with no telling name (a positional argument): a URL's secret parts, or a credential."""
    if not value or refers(value):
        return value
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", value):
        return _rewrite_url(value, replace)
    if looks_like_credential(value):
        return replace(name, value)
    return value


# -- URLs ------------------------------------------------------------------------------------------


def _rewrite_pairs(text: str, replace: Replace, bare_name: str, *, every: bool) -> str:
    """The values of a ``k=v&...`` text through `replace` (`every`, or the secret ones), keys kept.

    A part without ``=`` may itself be the secret (``?sk-live-123``, ``#eyJ...``): it is replaced
    whole, under `bare_name`. An empty value has nothing to hide and stays empty; a value that is a
    ``${VAR}`` reference (even percent-encoded) keeps its original spelling.
    """
    out: list[str] = []
    for part in text.split("&"):
        if not part:
            out.append(part)
            continue
        key, eq, value = part.partition("=")
        if not eq:
            plain = unquote_plus(part)
            shown = plain if refers(plain) else replace(bare_name, plain)
            out.append(part if shown == plain else shown)
        elif not value:
            out.append(part)
        else:
            plain, name = unquote_plus(value), unquote_plus(key)
            if every:
                shown = plain if refers(plain) else replace(name, plain)
            else:
                shown = _show_named(name, plain, replace)
            out.append(f"{key}={value if shown == plain else shown}")
    return "&".join(out)


def _rewrite_path(path: str, replace: Replace) -> str:
    """A path segment that looks like a credential (``/v1/<token>/``); words, versions, dates stay."""
    segments = path.split("/")
    out: list[str] = []
    for segment in segments:
        plain = unquote(segment)
        if plain and not refers(plain) and looks_like_credential(plain):
            out.append(replace("url_token", plain))
        else:
            out.append(segment)
    return "/".join(out)


def _rewrite_url(url: str, replace: Replace) -> str:
    try:
        parts = urlsplit(url)
    except ValueError:
        return "(invalid URL)"
    netloc = parts.netloc
    if "@" in netloc:  # user:password@host, or a token as the user
        user, _, host = netloc.rpartition("@")
        plain = unquote(user)
        if refers(plain) or (":" not in plain and not looks_like_credential(plain)):
            netloc = f"{user}@{host}"
        else:
            netloc = f"{replace('url_credentials', plain)}@{host}"
    path = _rewrite_path(parts.path, replace)
    query = _rewrite_pairs(parts.query, replace, "query", every=False)
    fragment = _rewrite_pairs(parts.fragment, replace, "fragment", every=True)
    return urlunsplit((parts.scheme, netloc, path, query, fragment))


# -- arguments -------------------------------------------------------------------------------------

# Flags that name where a secret is, or its kind, not the secret itself (--token-file, --auth-url).
_NOT_A_VALUE_FLAG = re.compile(r"(file|path|dir|url|uri|endpoint|host|port|type|mode|format|level|env|var)$", re.I)
_HEADER_FLAG = re.compile(r"^(-H|--header|--headers|--http-header|--add-header)$")
_ENV_PAIR = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")


def _secret_flag(flag: str) -> bool:
    if not flag.startswith("-") or flag.strip("-") == "":
        return False
    bare = flag.lstrip("-")
    if bare.lower().startswith("no-") or _NOT_A_VALUE_FLAG.search(bare):
        return False
    return looks_secret_name(bare)


def _header_line(line: str, replace: Replace) -> str:
    """``Authorization: Bearer X`` (or ``Name=value``) with its value shown as a named value."""
    m = re.match(r"^\s*([A-Za-z0-9_-]+)(\s*[:=]\s*)(.*)$", line, re.S)
    if m is None:
        return _show_free("header", line, replace)
    name, sep, value = m.groups()
    return f"{name}{sep}{_show_named(name, value, replace)}"


def _rewrite_args(args: list[str], replace: Replace) -> list[str]:
    """The value after ``--token``-like flags (and ``--token=...``), header arguments (also split over
    several arguments: ``-H Authorization: Bearer X``), ``KEY=value`` arguments with a secret name,
    and URLs or credential-shaped words anywhere."""
    out: list[str] = []
    # What the next argument is: ("secret", flag) a flag's value, ("header", flag) a header line,
    # ("named", header name) a header's value after ``Name:``.
    pending: tuple[str, str] | None = None
    for arg in args:
        if pending is not None and not arg.startswith("--"):
            kind, name = pending
            pending = None
            if kind == "header":
                head = re.fullmatch(r"([A-Za-z0-9_-]+):", arg)
                pending = ("named", head.group(1)) if head else None
                out.append(arg if head else _header_line(arg, replace))
            elif kind == "named" and arg.lower() in _SCHEME_WORDS:
                out.append(arg)
                pending = pending or ("named", name)
            elif kind == "named":
                out.append(_show_named(name, arg, replace))
            else:
                out.append(arg if refers(arg) else _with_scheme(name.lstrip("-"), arg, replace))
            continue
        pending = None
        if arg.startswith("-") and len(arg) > 1:
            flag, eq, value = arg.partition("=")
            if _HEADER_FLAG.match(flag):
                out.append(f"{flag}={_header_line(value, replace)}" if eq else arg)
                pending = None if eq else ("header", flag)
            elif _secret_flag(flag):
                out.append(f"{flag}={_show_named(flag.lstrip('-'), value, replace) if value else value}"
                           if eq else arg)
                pending = None if eq else ("secret", flag)
            elif eq:
                out.append(f"{flag}={_show_free(flag.lstrip('-'), value, replace)}")
            else:
                out.append(arg)
            continue
        key, eq, value = arg.partition("=")
        if eq and _ENV_PAIR.match(key) and value:
            out.append(f"{key}={_show_named(key, value, replace)}")
        else:
            out.append(_show_free("arg", arg, replace))
    return out


# -- what callers use -------------------------------------------------------------------------------


def mask_url(url: str) -> str:
    return _rewrite_url(url, _masked)


def mask_args(args: list[str]) -> list[str]:
    return _rewrite_args(args, _masked)


def mask_map(values: dict[str, str]) -> dict[str, str]:
    """Env vars or headers as responses show them: secret ones masked, harmless ones readable."""
    return {k: _show_named(k, v, _masked) for k, v in values.items()}


def placeholder_map(values: dict[str, str], names: Placeholders | None = None) -> dict[str, str]:
    """For exports: every secret value becomes a ``${NAME}`` placeholder named after its key."""
    names = names or Placeholders()
    return {k: _show_named(k, v, names) for k, v in values.items()}


def placeholder_url(url: str, names: Placeholders | None = None) -> str:
    return _rewrite_url(url, names or Placeholders())


def placeholder_args(args: list[str], names: Placeholders | None = None) -> list[str]:
    return _rewrite_args(args, names or Placeholders())


def stored_as_references(text: str, stored: Mapping[str, str]) -> str:
    """`text` with every value of the secret store in it (`stored`: value -> its name) written as the
    ``${NAME}`` it is stored under: what came from the store is a secret whatever its key says, and an
    import asks for it by the name the user knows. References already in `text` stay as they are."""
    if not stored or not text:
        return text
    parts = re.split(r"(\$\{[A-Za-z_][A-Za-z0-9_]*\})", text)
    return "".join(part if i % 2 else scrub(part, stored, lambda v: "${" + stored[v] + "}")
                   for i, part in enumerate(parts))


def masked_command(command: str | None, args: list[str]) -> list[str] | None:
    """A server's command line as responses show it: the command, then its args with secrets masked."""
    return [command, *mask_args(args)] if command else None


def secret_values(*, args: list[str] | None = None, env: dict[str, str] | None = None,
                  headers: dict[str, str] | None = None, url: str | None = None) -> list[str]:
    """The literal values a masked view of this config hides: what `known.remember` should get."""
    found: list[str] = []

    def collect(name: str, value: str) -> str:
        if value and not refers(value):
            found.append(value)
        return MASK

    _rewrite_args(args or [], collect)
    for values in (env or {}, headers or {}):
        for name, value in values.items():
            _show_named(name, value, collect)
    if url:
        _rewrite_url(url, collect)
    return found


def masked_tail(value: str) -> str:
    """How ``secrets/list`` shows a stored secret: the last 4 characters of a long value (enough to
    tell two apart), nothing of a short one."""
    return MASK + value[-4:] if len(value) >= 12 else MASK


def masked_key(key: str) -> str:
    """How responses show an API key: enough to tell keys apart (``sk-…abcd``), never enough to use."""
    if is_reference(key):
        return key
    return f"{key[:3]}…{key[-4:]}" if len(key) >= 16 else MASK


# -- free text --------------------------------------------------------------------------------------

_URL_IN_TEXT = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>`\\]+")
_AUTH_HEADER_IN_TEXT = re.compile(
    r"(?i)\b((?:proxy-)?authorization|x-api-key|api-key|x-auth-token|cookie|set-cookie)"
    r"(['\"]?\s*[:=]\s*['\"]?)((?:bearer|basic|token|digest)\s+)?([^\s'\",;\\]+)"
)
# Not a challenge's parameters (``WWW-Authenticate: Bearer realm="x"``): those are no secret.
_BEARER_IN_TEXT = re.compile(r"(?i)\b(bearer|basic)(\s+)([A-Za-z0-9._~+/-]{6,}=*)(?![\w\"=])")
_FLAG_IN_TEXT = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)(=|[ \t]+)(\"[^\"]*\"|'[^']*'|[^\s\"',;\]\[)(\\]+)")
_PAIR_IN_TEXT = re.compile(r"(?<![\w-])([A-Za-z_][A-Za-z0-9_.-]*)([ \t]*=[ \t]*)(\"[^\"]*\"|'[^']*'|[^\s&,;'\"\\]+)")
_QUOTED_PAIR_IN_TEXT = re.compile(r"([\"'])([A-Za-z_][\w.-]*)\1(\s*:\s*)([\"'])([^\"'\\]*)\4")
_WORD_IN_TEXT = re.compile(r"[A-Za-z0-9._~+/=-]{8,}")


def _trim_url(match: re.Match[str]) -> str:
    url = match.group(0)
    tail = ""
    while url and url[-1] in ".,;:)]}":
        url, tail = url[:-1], url[-1] + tail
    return mask_url(url) + tail


def _flag_in_text(m: re.Match[str]) -> str:
    flag, sep, value = m.groups()
    # Shorter than a secret can be told from a word (known.MIN_LENGTH): prose ("--token to set it").
    if len(value.strip("\"'")) < 4 or value.startswith("-") or MASK in value or not _secret_flag(flag):
        return m.group(0)
    return f"{flag}{sep}{MASK}"


def _pair_in_text(m: re.Match[str]) -> str:
    name, sep, value = m.groups()
    plain = value.strip("\"'")
    if len(plain) < 4 or MASK in plain or refers(plain) or (plain.isdigit() and len(plain) < 6):  # a count
        return m.group(0)
    if not (looks_secret_name(name) or looks_like_credential(plain, hex_ids=False)):
        return m.group(0)
    return f"{name}{sep}{MASK}"


def _quoted_pair_in_text(m: re.Match[str]) -> str:
    q, name, sep, q2, value = m.groups()
    if not value or MASK in value or refers(value) or not looks_secret_name(name):
        return m.group(0)
    return f"{q}{name}{q}{sep}{q2}{MASK}{q2}"


def _word_in_text(m: re.Match[str]) -> str:
    word = m.group(0)
    core = word.rstrip(".")  # the end of a sentence
    return MASK + word[len(core):] if looks_like_credential(core, random=False) else word


def mask_text(text: str) -> str:
    """Free text with the secrets it shows by their shape masked (see the module's docstring)."""
    if "://" in text:
        text = _URL_IN_TEXT.sub(_trim_url, text)
    text = _AUTH_HEADER_IN_TEXT.sub(
        lambda m: m.group(0) if m.group(4) == MASK or refers(m.group(4))
        else f"{m.group(1)}{m.group(2)}{m.group(3) or ''}{MASK}", text)
    text = _BEARER_IN_TEXT.sub(lambda m: m.group(0) if m.group(3) == MASK else f"{m.group(1)}{m.group(2)}{MASK}",
                               text)
    if "-" in text:
        text = _FLAG_IN_TEXT.sub(_flag_in_text, text)
    if "=" in text:
        text = _PAIR_IN_TEXT.sub(_pair_in_text, text)
    if ":" in text:
        text = _QUOTED_PAIR_IN_TEXT.sub(_quoted_pair_in_text, text)
    return _WORD_IN_TEXT.sub(_word_in_text, text)


def clean(text: str) -> str:
    """Text that is about to leave the process (an error message, a log line, a stderr tail): every
    value known to be secret, then every secret by its shape, masked."""
    return mask_text(scrub_known(text)) if text else text


# A tool's JSON repeats the same few keys on every record of its calls ("path", "content").
_secret_key = functools.lru_cache(maxsize=4096)(looks_secret_name)


def mask_json(value: Any, name: str = "") -> Any:
    """A JSON value a tool was given or gave back (arguments, a result), as records of calls show
    it: a string under a name that says secret (``{"apiKey": ...}``; items of a named list too) or
    shaped like a credential is masked as a named value is; any other string as `clean` shows text.
    A new value: the one given is left as it was."""
    if isinstance(value, str):
        if name and value and not refers(value) and (_secret_key(name) or looks_like_credential(value)):
            return _with_scheme(name, value, _masked)
        return clean(value)
    if isinstance(value, dict):
        return {k: mask_json(v, k if isinstance(k, str) else "") for k, v in value.items()}  # pyright: ignore[reportUnknownVariableType] -- any JSON object
    if isinstance(value, list):
        return [mask_json(v, name) for v in value]  # pyright: ignore[reportUnknownVariableType] -- any JSON array
    return value


"""An HTTP tool's declaration: the ``http:`` block of a tool in ``toolset.yaml`` (and, later, the
definition ``tools/put`` takes). One model, ``HttpSpec``, checked once when the manifest is read;
the runner (``runner.py``) only ever sees a checked one.

A tool is one request (``method``, ``urlTemplate``, ...) or several in sequence (``steps``), each
later step able to use what the earlier ones returned (``${login.token}``). ``${name}`` is the
call's argument ``name`` when the input schema declares it, an earlier step's result when a step
has that id, else the tool's config value or secret of that name (see ``templates.py``).
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

import msgspec

from ...result_schema import schema_problem
from .auth import HttpAuth
from .guard import parse_host_entry
from .templates import PLACEHOLDER, Template, TemplateError

Method = Literal["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
STEP_ID = r"^[A-Za-z_][A-Za-z0-9_]{0,63}$"
HEADER_NAME = r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,128}$"  # RFC 9110 token: no placeholder, no line break

MiB = 1 << 20
DEFAULT_TIMEOUT = 30.0
DEFAULT_MAX_RESPONSE = 10 * MiB
DEFAULT_MAX_REQUEST = 1 * MiB
HARD_MAX_BYTES = 256 * MiB  # what a manifest may ask for at most: the result is held in memory


class ResponseSpec(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, rename="camel", omit_defaults=True,
                   frozen=True):
    """Which part of the response becomes the result."""

    # json: the body must be JSON (an error result says so when it is not); text: the body as text.
    format: Literal["json", "text"] = "json"
    # A JSON Pointer (RFC 6901) into the JSON body, e.g. "/data/items"; "" is the whole body.
    select: str = ""


class StepSpec(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, rename="camel", omit_defaults=True):
    """One request."""

    id: Annotated[str, msgspec.Meta(pattern=STEP_ID)] = "request"
    method: Method = "GET"
    url_template: str
    query: dict[str, str | list[str]] = {}
    headers: dict[str, str] = {}
    body: Any = None  # a JSON template: strings in it are templates; "${x}" alone keeps x's JSON type
    form: dict[str, str] | None = None  # an application/x-www-form-urlencoded body instead
    response: ResponseSpec = ResponseSpec()


class HttpSpec(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, rename="camel", omit_defaults=True):
    """The ``http:`` block of a tool. Either the one request's fields or ``steps``."""

    method: Method = "GET"
    url_template: str | None = None
    query: dict[str, str | list[str]] = {}
    headers: dict[str, str] = {}
    body: Any = None
    form: dict[str, str] | None = None
    response: ResponseSpec = ResponseSpec()
    steps: list[StepSpec] = []
    # Hosts the requests may go to ("api.example.com", "*.example.com", "127.0.0.1:8080", "10.0.0.0/8"):
    # the rules of guard.py, which also refuses private addresses that are not listed.
    allowed_hosts: list[str] = []
    output_schema: dict[str, Any] | None = None  # the result is checked against it
    timeout: Annotated[float, msgspec.Meta(gt=0, le=600)] = DEFAULT_TIMEOUT  # seconds, per request
    max_retries: Annotated[int, msgspec.Meta(ge=0, le=10)] = 2
    max_retry_wait: Annotated[float, msgspec.Meta(ge=0, le=600)] = 30.0  # the longest Retry-After honoured
    max_request_bytes: Annotated[int, msgspec.Meta(gt=0, le=HARD_MAX_BYTES)] = DEFAULT_MAX_REQUEST
    max_response_bytes: Annotated[int, msgspec.Meta(gt=0, le=HARD_MAX_BYTES)] = DEFAULT_MAX_RESPONSE
    max_calls_per_minute: Annotated[int, msgspec.Meta(gt=0, le=100_000)] | None = None
    follow_redirects: bool = False
    auth: HttpAuth | None = None  # the auth helpers (auth.py): bearer, basic, apiKey, hmac, oauth2

    def requests(self) -> list[StepSpec]:
        """The requests in order (a one-request tool is one step)."""
        if self.steps:
            return self.steps
        assert self.url_template is not None  # (checked)
        return [StepSpec(method=self.method, url_template=self.url_template, query=self.query,
                         headers=self.headers, body=self.body, form=self.form, response=self.response)]


class SpecError(Exception):
    """A declaration mistake: ``where`` is the field inside the ``http:`` block (``urlTemplate``)."""

    def __init__(self, where: str, reason: str) -> None:
        super().__init__(f"{where}: {reason}")
        self.where, self.reason = where, reason


def decode(data: Any, input_schema: dict[str, Any] | None) -> HttpSpec:
    """``data`` (the ``http:`` block as plain data) as a checked spec, or SpecError."""
    try:
        spec = msgspec.convert(data, HttpSpec)
    except msgspec.ValidationError as exc:
        reason, sep, at = str(exc).rpartition(" - at `")
        raise SpecError(at.rstrip("`").removeprefix("$").lstrip(".") if sep else "", reason if sep else str(exc)
                        ) from None
    check(spec, input_schema)
    return spec


def check(spec: HttpSpec, input_schema: dict[str, Any] | None) -> None:
    """Everything msgspec cannot see: one request or steps, URL shape, where arguments may go."""
    single = spec.url_template is not None
    if single and spec.steps:
        raise SpecError("steps", "give either the one request's urlTemplate or steps, not both")
    if not single and not spec.steps:
        raise SpecError("urlTemplate", 'give the URL to call, e.g. "https://api.example.com/items/${id}"')
    if not spec.allowed_hosts:
        raise SpecError("allowedHosts", 'list the hosts this tool may call, e.g. ["api.example.com"] (or set '
                                        "allowed_hosts for the whole toolset)")
    for i, host in enumerate(spec.allowed_hosts):
        if isinstance(wrong := parse_host_entry(host), str):
            raise SpecError(f"allowedHosts[{i}]", wrong)
    if spec.output_schema is not None and (wrong := schema_problem(spec.output_schema)) is not None:
        raise SpecError("outputSchema", f"cannot check results against it: {wrong}")
    arguments = set((input_schema or {}).get("properties") or {})
    earlier: set[str] = set()
    for i, step in enumerate(spec.requests()):
        where = f"steps[{i}]." if spec.steps else ""
        if step.id in earlier:
            raise SpecError(f"{where}id", f"{step.id!r} is used by an earlier step")
        if step.id in arguments and spec.steps:
            raise SpecError(f"{where}id", f"{step.id!r} is also an argument in input_schema; rename the step")
        _check_step(where, step, arguments, earlier)
        earlier.add(step.id)


def _check_step(where: str, step: StepSpec, arguments: set[str], earlier: set[str]) -> None:
    url = step.url_template
    if not re.match(r"^https?://", url):
        raise SpecError(f"{where}urlTemplate", "must start with http:// or https://")
    authority = re.split(r"[/?#]", url.split("://", 1)[1], maxsplit=1)[0]
    if not authority:
        raise SpecError(f"{where}urlTemplate", "has no host after the scheme")
    for name in PLACEHOLDER.findall(authority):
        root = name.split(".")[0]
        if root in arguments or root in earlier:
            # An argument (or what a server answered) choosing the destination is the attack to prevent.
            raise SpecError(f"{where}urlTemplate", f"${{{name}}} is in the host part: the host may come from "
                                                   "config or a secret, never from an argument or a response")
    if "@" in authority:
        raise SpecError(f"{where}urlTemplate", "holds user info ('@'); use the auth block or a header instead")
    _check_parts(where, step, earlier)
    if step.body is not None and step.form is not None:
        raise SpecError(f"{where}form", "a request has a JSON body or a form, not both")
    if step.body is not None and step.method in ("GET", "HEAD"):
        raise SpecError(f"{where}body", f"a {step.method} request has no body; use query")
    _template(f"{where}urlTemplate", url, earlier)
    for path, text in _strings(step.body, f"{where}body"):
        _template(path, text, earlier)
    if step.response.select and not step.response.select.startswith("/"):
        raise SpecError(f"{where}response.select", 'a JSON Pointer starts with "/" (e.g. "/data/items")')
    if step.response.select and step.response.format == "text":
        raise SpecError(f"{where}response.select", "a text response has no parts to select; drop select")


def _check_parts(where: str, step: StepSpec, earlier: set[str]) -> None:
    for key, value in step.headers.items():
        if not re.match(HEADER_NAME, key):
            raise SpecError(f"{where}headers.{key}", "not a valid header name (letters, digits and -_. only)")
        _template(f"{where}headers.{key}", value, earlier)
    for key, value in step.query.items():
        for n, v in enumerate(value if isinstance(value, list) else [value]):
            _template(f"{where}query.{key}" + (f"[{n}]" if isinstance(value, list) else ""), v, earlier)
    for key, value in (step.form or {}).items():
        _template(f"{where}form.{key}", value, earlier)


def _template(where: str, text: str, earlier: set[str]) -> None:
    try:
        Template(text)
    except TemplateError as exc:
        raise SpecError(where, str(exc)) from None
    for name in PLACEHOLDER.findall(text):
        root, dot, _ = name.partition(".")
        if dot and root not in earlier:
            raise SpecError(where, f"${{{name}}} reads the result of a step {root!r}, which no earlier step is")


def _strings(value: Any, where: str) -> list[tuple[str, str]]:
    if isinstance(value, str):
        return [(where, value)]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in _strings(v, f"{where}.{k}")]
    if isinstance(value, list):
        return [s for n, v in enumerate(value) for s in _strings(v, f"{where}[{n}]")]
    return []

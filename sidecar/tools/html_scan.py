"""Where a script put into an HTML page will run: the tag positions a browser sees as tags.

A string search for ``</head>`` also finds one inside a comment, a ``<script>``, a ``<title>`` or a
``<template>``; a script put there is text, or never runs. ``insertion_point`` tokenizes the page the
way the HTML standard's tokenizer does (WHATWG HTML §13.2.5) for what decides where a tag is a tag:
comments (``<!-->`` and ``--!>`` included), doctypes and bogus comments, quoted attribute values,
the raw text of ``script`` (with its escaped states), ``style``, ``title``, ``textarea``, ``xmp``,
``iframe``, ``noembed``, ``noframes``, ``noscript`` (scripting is on where the data script runs),
``plaintext``, and ``<template>`` contents, where a script does not run. Where the tokenizer's state
depends on more of the tree builder than that (``svg`` and ``math`` content, ``select``,
``frameset``), or the page is built to make the scan slow, the scan stops and the script goes to the
fallback position, after a leading doctype or at the very start, where every browser runs it. stdlib
``html.parser`` is not used: it ends a comment or a raw text element at other places than a browser
does (``</ script>``), and those places changed between Python releases.
"""

from __future__ import annotations

import re
from typing import NamedTuple

_TAG_NAME = re.compile(r"[A-Za-z][^\t\n\f\r />]*")
# The rest of a tag after its name: attributes (separated by whitespace or "/", each with an optional
# quoted or unquoted value; a ">" in quotes is no end, and a quote left open runs to the end of the
# page, as in a browser), then the separators before ">".
# Atomic groups and possessive repeats keep a page with no ">" linear.
_TAG_REST = re.compile(r"""(?>[\t\n\f\r /]*+(?>[^\t\n\f\r />][^\t\n\f\r />=]*+[\t\n\f\r ]*+"""
                       r"""(?:=[\t\n\f\r ]*+(?:"[^"]*+(?:"|\Z)|'[^']*+(?:'|\Z)|[^\t\n\f\r >]*+))?))*+"""
                       r"""[\t\n\f\r /]*+>""")
_RAW = {"style", "xmp", "iframe", "noembed", "noframes", "noscript", "title", "textarea"}
# Start tags after which the tokenizer's state hangs on the tree builder: svg/math content (no raw
# text there, CDATA sections), and select/frameset (where <style>, <title>, ... are ignored, not raw).
_UNMODELLED = {"svg", "math", "select", "frameset"}
# Past this many pieces of markup the scan gives up and takes the fallback position: a real page
# meets its "</head>" or "<body>" long before, and a request's thread is bound.
MAX_STEPS = 50_000
_RAW_END = {name: re.compile(rf"</{name}(?=[\t\n\f\r />])", re.IGNORECASE) for name in _RAW}
_COMMENT_CLOSE = re.compile(r"--!?>")
_SCRIPT_STEP = re.compile(r"</script(?=[\t\n\f\r />])|<script(?=[\t\n\f\r />])|<!--|-->", re.IGNORECASE)


class _Tag(NamedTuple):
    start: int
    stop: int  # past its ">"; past the page's end when it has none
    name: str  # lower case
    end: bool


def insertion_point(page: str) -> int:
    """Where a ``<script>`` goes: before the first ``</head>`` end tag, else right after the first
    ``<body>`` start tag, else after a leading doctype (so the page keeps its standards mode), else
    at the start. Only tags outside ``<template>`` count."""
    scan = _Scan(page)
    scan.run()
    if scan.head_end is not None:
        return scan.head_end
    if scan.body_start is not None:
        return scan.body_start
    return scan.doctype_end if scan.doctype_end is not None and scan.doctype_end <= len(page) else 0


class _Scan:
    """One pass over a page up to the first ``</head>`` or ``<body>`` that counts."""

    def __init__(self, page: str) -> None:
        self.page = page
        self.head_end: int | None = None
        self.body_start: int | None = None
        self.doctype_end: int | None = None
        self.templates = 0
        self.seen_tag = False
        self.done = False  # "<plaintext>" (everything after it is text), or a give-up

    def run(self) -> None:
        page, n, i = self.page, len(self.page), 0
        steps = 0
        while self.head_end is None and self.body_start is None and not self.done:
            steps += 1
            if steps > MAX_STEPS:
                return  # a page built to be slow to scan: the fallback position runs the script too
            lt = page.find("<", i)
            if lt < 0 or lt + 1 >= n:
                return
            nxt = page[lt + 1]
            if nxt in "!?":
                i = self._markup(lt)
                continue
            tag = _tag(page, lt)
            if tag is None:
                if page.startswith("</>", lt):
                    i = lt + 3
                elif nxt == "/" and lt + 2 < n:
                    i = _to_gt(page, lt)  # "</" then not a letter: a bogus comment up to ">"
                else:
                    i = lt + 1  # a "<" that starts nothing is text
                continue
            self.seen_tag = True
            if tag.stop > n:
                return  # a tag cut off by the end of the page is no tag
            i = self._html_tag(tag)

    def _markup(self, lt: int) -> int:
        """Past a comment, doctype or bogus comment at ``lt``."""
        page = self.page
        if page.startswith("<!--", lt):
            return _comment_end(page, lt)
        if page[lt + 2: lt + 9].lower() == "doctype":
            end = _to_gt(page, lt)
            if not self.seen_tag and self.doctype_end is None:
                self.doctype_end = end
            return end
        return _to_gt(page, lt)

    def _html_tag(self, tag: _Tag) -> int:
        if tag.end:
            if tag.name == "template":
                self.templates = max(0, self.templates - 1)
            elif tag.name == "head" and not self.templates:
                self.head_end = tag.start
            return tag.stop
        if tag.name in _UNMODELLED:
            self.done = True
            return len(self.page) + 1
        if tag.name == "template":
            self.templates += 1
        elif tag.name == "body" and not self.templates:
            self.body_start = tag.stop
        return self._raw(tag)

    def _raw(self, tag: _Tag) -> int:
        """Past the text of a raw text element that ``tag`` opens, else past ``tag``."""
        if tag.name == "plaintext":
            self.done = True
            return len(self.page) + 1
        if tag.name == "script":
            return _script_end(self.page, tag.stop)
        if tag.name in _RAW:
            return _raw_end(self.page, tag.stop, tag.name)
        return tag.stop


def _tag(page: str, lt: int) -> _Tag | None:
    """The start or end tag at ``lt`` with where it stops (past its ``>``; past the page's end if
    it has none), or None when ``<`` starts no tag."""
    end = page.startswith("</", lt)
    name = _TAG_NAME.match(page, lt + (2 if end else 1))
    if name is None:
        return None
    rest = _TAG_REST.match(page, name.end())
    return _Tag(lt, len(page) + 1 if rest is None else rest.end(), name[0].lower(), end)


def _to_gt(page: str, lt: int) -> int:
    gt = page.find(">", lt)
    return len(page) + 1 if gt < 0 else gt + 1


def _comment_end(page: str, lt: int) -> int:
    body = lt + 4
    if page.startswith(">", body):
        return body + 1  # "<!-->"
    if page.startswith("->", body):
        return body + 2  # "<!--->"
    close = _COMMENT_CLOSE.search(page, body)
    return len(page) + 1 if close is None else close.end()


def _end_tag_stop(page: str, at: int) -> int:
    tag = _tag(page, at)
    assert tag is not None  # called where "</name" was matched
    return tag.stop


def _raw_end(page: str, i: int, name: str) -> int:
    """Past the end tag that closes a raw text or RCDATA element opened before ``i``."""
    m = _RAW_END[name].search(page, i)
    return len(page) + 1 if m is None else _end_tag_stop(page, m.start())


def _script_end(page: str, i: int) -> int:
    """Past the ``</script>`` that ends a script's text: in its "escaped" state (after ``<!--``)
    a ``<script`` makes the next ``</script>`` text, up to ``-->``."""
    escaped = double = False
    for _ in range(MAX_STEPS):
        m = _SCRIPT_STEP.search(page, i)
        if m is None:
            break
        token = m[0].lower()
        i = m.start() + (2 if token == "<!--" else len(token))  # "<!-->": the "--" also starts "-->"
        if token == "<!--":
            escaped = escaped or not double
        elif token == "-->":
            escaped = double = False
        elif token == "<script":
            double = double or escaped
        elif not double:
            return _end_tag_stop(page, m.start())
        else:
            double = False
    return len(page) + 1

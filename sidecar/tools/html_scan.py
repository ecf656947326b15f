"""Where a script put into an HTML page will run: the tag positions a browser sees as tags.

A string search for ``</head>`` also finds one inside a comment, a ``<script>``, a ``<title>`` or a
``<template>``; a script put there is text, or never runs. ``insertion_point`` tokenizes the page the
way the HTML standard's tokenizer does (WHATWG HTML §13.2.5) for what decides where a tag is a tag:
comments (``<!-->`` and ``--!>`` included), doctypes and bogus comments, quoted attribute values,
the raw text of ``script`` (with its escaped states), ``style``, ``title``, ``textarea``, ``xmp``,
``iframe``, ``noembed``, ``noframes``, ``noscript`` (scripting is on where the data script runs),
``plaintext``, and the tree builder's two places where a script does not run as a page script:
``<template>`` contents and foreign (``svg``/``math``) content. stdlib ``html.parser`` is not used:
it ends a comment or a raw text element at other places than a browser does (``</ script>``), and
those places changed between Python releases.

The scan errs one way only: where it is unsure, it takes a later or the fallback position, never a
place a browser reads as text.
"""

from __future__ import annotations

import re

_SPACE = "\t\n\f\r "
_TAG_NAME = re.compile(r"[A-Za-z][^\t\n\f\r />]*")
# One step of a tag's inside: separators (``/`` counts as one unless right before ``>``), then
# ``>``, or an attribute with an optional quoted or unquoted value (a ``>`` in quotes is no end).
_ATTR = re.compile(r"""[\t\n\f\r /]*(?:(>)|[^\t\n\f\r />][^\t\n\f\r />=]*[\t\n\f\r ]*"""
                   r"""(?:=[\t\n\f\r ]*(?:"[^"]*"|'[^']*'|[^\t\n\f\r >]*))?)""")
_RAW = {"style", "xmp", "iframe", "noembed", "noframes", "noscript", "title", "textarea"}
# Start tags that end foreign content (WHATWG "in foreign content": these pop back to HTML).
_BREAKOUT = {"b", "big", "blockquote", "body", "br", "center", "code", "dd", "div", "dl", "dt", "em",
             "embed", "h1", "h2", "h3", "h4", "h5", "h6", "head", "hr", "i", "img", "li", "listing",
             "menu", "meta", "nobr", "ol", "p", "pre", "ruby", "s", "small", "span", "strong", "strike",
             "sub", "sup", "table", "tt", "u", "ul", "var"}
_SCRIPT_STEP = re.compile(r"</script(?=[\t\n\f\r />])|<script(?=[\t\n\f\r />])|<!--|-->", re.IGNORECASE)


class _Tag:
    __slots__ = ("end", "name", "self_closing", "start", "stop")

    def __init__(self, start: int, stop: int, name: str, end: bool, self_closing: bool) -> None:
        self.start, self.stop, self.name, self.end, self.self_closing = start, stop, name, end, self_closing


def insertion_point(page: str) -> int:
    """Where a ``<script>`` goes: before the first ``</head>`` end tag, else right after the first
    ``<body>`` start tag, else after a leading doctype (so the page keeps its standards mode), else
    at the start. Only tags outside ``<template>`` and foreign content count."""
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
        self.foreign: list[str] = []  # open svg/math elements and their descendants, innermost last
        self.seen_tag = False
        self.done = False  # "<plaintext>": everything after it is text

    def run(self) -> None:
        page, n, i = self.page, len(self.page), 0
        while self.head_end is None and self.body_start is None and not self.done:
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
            i = self._foreign_tag(tag) if self.foreign else self._html_tag(tag)

    def _markup(self, lt: int) -> int:
        """Past a comment, doctype, CDATA section or bogus comment at ``lt``."""
        page = self.page
        if page.startswith("<!--", lt):
            return _comment_end(page, lt)
        if page[lt + 2: lt + 9].lower() == "doctype":
            end = _to_gt(page, lt)
            if not self.seen_tag and self.doctype_end is None:
                self.doctype_end = end
            return end
        if self.foreign and page.startswith("<![CDATA[", lt):
            close = page.find("]]>", lt + 9)
            return len(page) + 1 if close < 0 else close + 3
        return _to_gt(page, lt)

    def _foreign_tag(self, tag: _Tag) -> int:
        if tag.end and tag.name in ("br", "p") or not tag.end and tag.name in _BREAKOUT:
            self.foreign.clear()  # back in HTML: the tag is an HTML one
            return self._html_tag(tag)
        if tag.end:
            if tag.name == "template":
                self.templates = max(0, self.templates - 1)
            if tag.name in self.foreign:
                del self.foreign[len(self.foreign) - 1 - self.foreign[::-1].index(tag.name):]
            return tag.stop
        # Inside an integration point (svg desc, foreignObject, ...) these are HTML elements; they
        # are read as such everywhere in foreign content, which at worst skips a tag a browser sees.
        if tag.name == "template":
            self.templates += 1
        if tag.name in _RAW or tag.name in ("script", "plaintext"):
            return self._raw(tag)
        if not tag.self_closing:
            self.foreign.append(tag.name)
        return tag.stop

    def _html_tag(self, tag: _Tag) -> int:
        if tag.end:
            if tag.name == "template":
                self.templates = max(0, self.templates - 1)
            elif tag.name == "head" and not self.templates:
                self.head_end = tag.start
            return tag.stop
        if tag.name in ("svg", "math"):
            if not tag.self_closing:
                self.foreign.append(tag.name)
        elif tag.name == "template":
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
    i = name.end()
    while True:
        step = _ATTR.match(page, i)
        assert step is not None  # every part of the pattern may be empty
        if step[1]:
            # "/" right before ">" makes it self-closing, but not as the end of an unquoted value
            # ("<a href=x/>"), where no separator comes before ">".
            self_closing = page[step.start(): step.start(1)].endswith("/")
            return _Tag(lt, step.end(), name[0].lower(), end, self_closing)
        if step.end() == i:
            return _Tag(lt, len(page) + 1, name[0].lower(), end, False)  # the page ends inside the tag
        i = step.end()


def _to_gt(page: str, lt: int) -> int:
    gt = page.find(">", lt)
    return len(page) + 1 if gt < 0 else gt + 1


def _comment_end(page: str, lt: int) -> int:
    body = lt + 4
    if page.startswith(">", body):
        return body + 1  # "<!-->"
    if page.startswith("->", body):
        return body + 2  # "<!--->"
    ends = [e for e in (page.find("-->", body), page.find("--!>", body)) if e >= 0]
    if not ends:
        return len(page) + 1
    first = min(ends)
    return first + (3 if page.startswith("-->", first) else 4)


def _end_tag_stop(page: str, at: int) -> int:
    tag = _tag(page, at)
    assert tag is not None  # called where "</name" was matched
    return tag.stop


def _raw_end(page: str, i: int, name: str) -> int:
    """Past the end tag that closes a raw text or RCDATA element opened before ``i``."""
    m = re.compile(rf"</{name}(?=[\t\n\f\r />])", re.IGNORECASE).search(page, i)
    return len(page) + 1 if m is None else _end_tag_stop(page, m.start())


def _script_end(page: str, i: int) -> int:
    """Past the ``</script>`` that ends a script's text: in its "escaped" state (after ``<!--``)
    a ``<script`` makes the next ``</script>`` text, up to ``-->``."""
    escaped = double = False
    while m := _SCRIPT_STEP.search(page, i):
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

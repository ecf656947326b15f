"""Where the html renderer puts its data script: tags a browser would read as text do not count."""

from __future__ import annotations

import html as htmllib
import json
import random
import re
from pathlib import Path

import pytest

from sidecar.tools.html_scan import MAX_STEPS, insertion_point
from sidecar.tools.render import inject_html
from tests.chromium import HOSTILE, dump_dom, probe

# "|" marks where the script must go (no page below has another "|").
CASES = [
    # the issue's case: the first "</head>" is inside a comment
    "<html><head><!-- </head> --><title>t</title>|</head><body></body></html>",
    "<head><!-- a -- b --!> |</head> -->",  # "--!>" ends a comment; the "-->" is text
    "<head><!--> |</head> -->",  # "<!-->" is a whole (empty) comment
    "<head><!---> x |</head> -->",  # so is "<!--->"
    "<head><!-- <!-- </head> --><x>|</head>",
    "<head><!doctype </head> >|</head>",  # a doctype (here a misplaced one) ends at the first ">"
    "<head><? </head> >|</head>",  # a bogus comment
    "<head><![CDATA[ </head> ]]>|</head>",  # outside svg: a bogus comment up to the first ">"
    "<head></ x </head>|</head>",  # "</" and not a letter: a bogus comment
    "<head><script>var s = '</head>';</script>|</head>",
    "<head><script>var s = '</ script></head>';</script>|</head>",  # "</ script>" does not end it
    "<head><script>a = '<!--<script>'; b = '</script></head>'; c = '-->'</script>|</HEAD>",  # double escaped
    "<head><script>a = '<!--'; </script >|</head>",  # escaped, but "</script" still ends it
    "<head><script>a = '<!-->'; b = '<script>';</script>|</head>",  # "<!-->" leaves the escape at once
    "<head><script type=module src=x></script>|</head>",
    "<head><style>a::after { content: '</head>' }</style>|</head>",
    "<head><title></head></title>|</head>",
    "<head><noscript></head></noscript>|</head>",
    "<head><textarea></head></textarea foo='>'>|</head>",
    "<head><template></head></template>|</head>",
    "<head><template><template></template></head></template>|</head>",
    "<head><meta content='</head>'><meta content=\"</head>\">|</head>",
    "<head><meta content=a>|</head>",
    # svg/math content, select and frameset: the scan stops, the fallback position is safe
    "|<head><svg></head><desc><template></desc></svg></head></template></head>",
    "|<head><svg><style></head></style></svg></head>",
    "<!doctype html>|<head><math><![CDATA[</math></head>]]></head>",
    "|<head><svg/></head>",
    "|<select><iframe><a b=\"</iframe><body>",  # in a select an <iframe> is ignored, not raw text
    "|<frameset><noscript></head>",
    "<html><head></head ><body></body></html>".replace("</head >", "|</head >"),
    # no "</head>": right after the first real <body ...>
    '<body class="x" data-a=">">|hi</body>',
    "<!-- <body> --><p><body a='>'>|x",
    "<template><body></template><body>|x",
    "<title><body></title><body>|x",
    # neither: after a leading doctype, else at the start
    "<!doctype html>|<p>fragment</p>",
    "<!-- c --><!DOCTYPE html>|<p>x",
    "|<p>fragment</p><!doctype html>",
    "|",
    "|<head><script></head>",  # an unterminated script: all text
    "|<plaintext></head><body>",
    "|<head </head>",  # a tag that never ends is no tag
    "|<head><meta content=\"x></head><body>",  # nor does one whose quote is never closed
    "<head><a b=\"x'>\" c='y\"'>|</head>",
    "|<bodyguard></bodyguard>",
]


@pytest.mark.parametrize("marked", CASES)
def test_the_script_goes_where_a_browser_reads_a_tag(marked: str):
    page = marked.replace("|", "")
    assert insertion_point(page) == marked.index("|")


@pytest.mark.parametrize("page", [
    "<!doctype html>" + "<p>" * MAX_STEPS + "</head>",
    "<!doctype html><script>" + "<!--<script>-->" * MAX_STEPS + "</script></head>",
])
def test_a_page_built_to_be_slow_to_scan_gets_the_fallback_position(page: str):
    # Scanning on would cost time in proportion to the page (or worse); after the doctype the
    # script runs as well.
    assert insertion_point(page) == len("<!doctype html>")


TRAPS = """<!doctype html><html><head>
<!-- </head> -->
<script>var a = '</head>'; var b = '<!--<script>'; var c = '</script></head>'; var d = '-->';</script>
<style>p::after { content: '</head>' }</style>
<title></head></title>
<template></head></template>
<svg><desc><template></desc></svg></head></template>
</head><body><div id=out></div><div id=status></div>
<script>
document.getElementById('out').textContent = JSON.stringify(window.__TOOL_DATA__);
document.getElementById('status').textContent = String(window.pwned);
</script></body></html>"""


def test_a_real_browser_sees_the_data_behind_every_trap(tmp_path: Path):
    data, pwned = probe(inject_html(TRAPS, HOSTILE), tmp_path)
    assert data == HOSTILE and pwned == "undefined"


def test_the_issues_page_in_a_real_browser(tmp_path: Path):
    # The reported artifact: a comment in its head holds "</head>". Read before the page's own
    # script runs, so the data must already be there.
    page = ("<!doctype html><html><head><!-- </head> --><meta charset=utf-8></head><body><p id=out></p>"
            "<script>document.getElementById('out').textContent = typeof window.__TOOL_DATA__ + ' ' +"
            " JSON.stringify(window.__TOOL_DATA__);</script></body></html>")
    dom, _ = dump_dom(inject_html(page, {"rows": 3}), tmp_path)
    assert '<p id="out">object {"rows":3}</p>' in dom
    assert "<!-- </head> -->" in dom  # the comment is still a comment


PIECES = ["<!-- </head> -->", "<!-->", "<!--->", "--!>", "-->", "<!--", "<script>", "</script>", "<script>var s='",
          "';</script>", "<script><!--<script>", "</ script>", "<title>", "</title>", "<textarea>", "</textarea>",
          "<style>", "</style>", "<template>", "</template>", "<svg>", "</svg>", "<svg/>", "<math>", "</math>",
          "<desc>", "</desc>", "<foreignObject>", "<p>", "</p>", "<head>", "</head>", "</HEAD >", "<body>",
          "<body a='>'>", "</body>", "<html>", "<!doctype html>", "<![CDATA[", "]]>", "<noscript>", "</noscript>",
          "<xmp>", "</xmp>", "<iframe>", "</iframe>", "<a href=x/>", "x", "<div title='</head>'>", "<table>",
          "<select>", "<? </head> ?>", "</ x>", "<br>", "<noembed>", "</noembed>", " ", "<meta content=\"x>",
          "<a b='>", "'", "\"", "<math><mi>", "<svg><foreignObject><p>"]


def test_random_pages_in_a_real_browser_always_see_the_data(tmp_path: Path):
    # Pages made of the pieces that move a tag into text, each in its own frame of one page that
    # Chromium loads once: wherever the scan put the script, the frame's window must have the data.
    rng = random.Random(18)
    pages = ["".join(rng.choice(PIECES) for _ in range(rng.randint(2, 12))) for _ in range(300)]
    frames = "".join(f'<iframe id=f{i} srcdoc="{htmllib.escape(inject_html(p, {"n": i}), quote=True)}"></iframe>'
                     for i, p in enumerate(pages))
    collect = """<pre id=results></pre><script>
window.onload = () => {
  const seen = [];
  for (const f of document.querySelectorAll('iframe')) {
    let d; try { d = f.contentWindow.__TOOL_DATA__; } catch (e) { d = 'error ' + e; }
    seen.push(d === undefined ? null : d);
  }
  document.getElementById('results').textContent = JSON.stringify(seen);
};</script>"""
    dom, stderr = dump_dom(f"<!doctype html><html><body>{frames}{collect}</body></html>", tmp_path,
                           virtual_time_ms=20000)
    found = re.search(r'<pre id="results">(.*?)</pre>', dom, re.DOTALL)
    assert found and found[1], f"the frames were not collected:\n{stderr[-2000:]}"
    seen = json.loads(htmllib.unescape(found[1]))
    missed = [(i, pages[i]) for i, d in enumerate(seen) if d != {"n": i}]
    assert not missed, missed[:10]

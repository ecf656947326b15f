"""Cards: colours, titles, the card shape, the sanitiser, and a hostile card in a real browser."""

from __future__ import annotations

import html as htmllib
import json
import re
from pathlib import Path
from typing import Any

import msgspec
import pytest

from sidecar.errors import ManifestError
from sidecar.tools import cards
from sidecar.tools.output import OutputDecl, is_css_colour
from sidecar.toolsets.manifest import from_data
from tests.chromium import dump_dom

VECTORS: list[str] = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "cards" / "xss_vectors.json")
                                .read_text("utf-8"))


@pytest.mark.parametrize("colour", [
    "#fff", "#FFFA", "#4a90d4", "#4a90d4cc", "steelblue", "RebeccaPurple", "transparent", "currentColor",
    "rgb(1, 2, 3)", "rgba(74, 144, 212, 0.10)", "rgb(10% 20% 30% / .5)", "hsl(210, 50%, 40%)",
    "hsla(210deg, 50%, 40%, 0.3)", "hsl(0.5turn 10% 10%)",
])
def test_css_colours_are_accepted(colour: str):
    assert is_css_colour(colour)


@pytest.mark.parametrize("colour", [
    "", "#ff", "#fffff", "#ggg", "blu", "red;", "red; background: url(x)", "url(javascript:alert(1))",
    "expression(alert(1))", "var(--x)", "rgb(1, 2)", "rgb(a, b, c)", "rgb(1,2,3) x", "hsl(1, 2, 3)",
    "\\72 ed", "#fff\n", "red\x00", "calc(1px)",
])
def test_anything_else_is_not_a_colour(colour: str):
    assert not is_css_colour(colour)


def _manifest(output: dict[str, Any], where: str = "tool") -> dict[str, Any]:
    data: dict[str, Any] = {"manifest_version": "1", "id": "t", "name": "T"}
    if where == "tool":
        data["tools"] = [{"id": "a", "entrypoint": "m:f", "output": output}]
    else:
        data["mcp_servers"] = [{"id": "s", "command": "x", "tool_output": {"card": output}}]
    return data


@pytest.mark.parametrize(("where", "path"), [("tool", "tools[0].output.card.background_color"),
                                             ("server", "mcp_servers[0].tool_output.card.card.background_color")])
def test_a_bad_colour_is_a_manifest_error_at_its_field(where: str, path: str):
    with pytest.raises(ManifestError) as err:
        from_data(_manifest({"card": {"accent_color": "#abc", "background_color": "red;x"}}, where))
    assert err.value.data is not None and err.value.data["path"] == path
    assert "CSS colour" in err.value.data["reason"]


def test_unknown_output_keys_and_bad_limits_are_refused():
    with pytest.raises(ManifestError) as err:
        from_data(_manifest({"card": {"colour": "red"}}))
    assert err.value.data is not None and err.value.data["path"] == "tools[0].output.card"
    with pytest.raises(ManifestError) as err:
        from_data(_manifest({"max_chars": 10}))
    assert err.value.data is not None and err.value.data["path"] == "tools[0].output.max_chars"


def test_the_title_fills_arguments_as_plain_text():
    missing: list[str] = []
    got = cards.title("{{ city }} / {{when.day}} / {{nope}} / {{n}}",
                      {"city": "Rome{{n}}\n\u202e", "when": {"day": "Mon"}, "n": 3}, missing)
    assert got == "Rome{{n}} / Mon / / 3"  # a filled value is never filled again
    assert missing == ["{{nope}}"]
    assert cards.title(None, {}) == ""
    assert len(cards.title("x" * 1000, {})) == cards.MAX_TITLE


@pytest.mark.parametrize(("result", "shape"), [
    ({"text": "t", "html": "<b>h</b>", "extra": 1}, {"text": "t", "html": "<b>h</b>"}),
    ("just text", {"text": "just text"}),
    ({"error": "down"}, {"error": "down"}),
    ({"text": 5}, None),
    ({"other": "x"}, None),
    ([1], None),
    ({"content": [{"type": "text", "text": "{}"}], "structuredContent": {"html": "<p>x</p>"}}, {"html": "<p>x</p>"}),
    ({"content": [{"type": "text", "text": "x"}]}, None),
])
def test_the_card_shape(result: Any, shape: Any):
    assert cards.fields(result) == shape


def test_a_plan_needs_a_declared_card_and_the_result_title_wins():
    declared = msgspec.convert({"card": {"title": "T {{q}}", "accent_color": "red"}}, OutputDecl)
    plan = cards.plan(declared, {"q": "x"}, {"html": "<p onclick=1>hi</p>", "title": "Mine\n"})
    assert plan == {"renderer": "card", "config": {"title": "Mine", "html": "<p>hi</p>", "accentColor": "red"},
                    "missing": []}
    text_only = cards.plan(declared, {}, {"text": "<b>a & b</b>"})
    assert text_only is not None and "&lt;b&gt;a &amp; b&lt;/b&gt;" in text_only["config"]["html"]
    assert text_only["missing"] == ["{{q}}"]
    assert cards.plan(OutputDecl(), {}, {"html": "<p>x</p>"}) is None  # nothing declared
    off = msgspec.convert({"card": {"enabled": False}}, OutputDecl)
    assert cards.plan(off, {}, {"html": "<p>x</p>"}) is None
    assert cards.error_of(declared, {"error": "down"}) == "down"
    assert cards.error_of(OutputDecl(), {"error": "down"}) is None  # an ordinary result may say "error"


@pytest.mark.parametrize(("style", "kept"), [
    ("color: red; padding: 4px 8px", "color: red; padding: 4px 8px"),
    ("color:red; background: url(javascript:alert(1))", "color: red"),
    ("background:u\\72l(x); width: calc(100% - 2px)", "width: calc(100% - 2px)"),
    ("color: red /* ; background: url(x) */", None),
    ("width: expression(alert(1))", None),
    ("color: rgb(1 2 3 / 50%); font: 12px/1.5 serif", "color: rgb(1 2 3 / 50%); font: 12px/1.5 serif"),
    ("behavior: url(x.htc); -moz-binding: url(x)", None),
    ("background-image: image-set('x.png' 1x)", None),
])
def test_style_declarations(style: str, kept: str | None):
    assert cards.safe_style(style) == kept


def test_sanitised_html_keeps_the_card_and_drops_the_rest():
    out = cards.sanitize(
        '<div style="padding:8px;position:fixed;z-index:9" id="x" class="y"><h2 title="t">Hi</h2>'
        '<table><tr><td colspan="2">c</td></tr></table><a href="https://e.org/a">ok</a><a href="/in/app">rel</a>'
        '<img src="https://e.org/i.png" alt="i"><img src="data:image/png;base64,AA"></div>')
    assert out == ('<div style="padding:8px"><h2 title="t">Hi</h2><table><tbody><tr><td colspan="2">c</td></tr>'
                   '</tbody></table><a href="https://e.org/a" rel="noopener noreferrer nofollow">ok</a>'
                   '<a rel="noopener noreferrer nofollow">rel</a><img src="https://e.org/i.png" alt="i"><img></div>')


# -- a hostile card in a real browser ------------------------------------------------------------

# The UI's way: the plan's html goes into a div's innerHTML. Each vector calls hit(n) if it ever
# runs; the page then clicks, focuses and hovers every element of the card (links to anything but
# javascript: excepted: they would leave the page), waits, and writes what ran and which dangerous attributes are left.
_PAGE = """<!doctype html><html><head><title>card</title></head><body><div id=card></div><div id=report></div>
<script>
window.hits = [];
window.hit = function (n) { window.hits.push(n); };
var card = document.getElementById('card');
card.innerHTML = CARD;
var cells = card.querySelectorAll('*');
for (var i = 0; i < cells.length; i++) {
  var el = cells[i], url = typeof el.href === 'string' ? el.href : '';  // as the browser resolved it
  el.dispatchEvent(new MouseEvent('mouseover', {bubbles: true}));
  try { el.focus(); } catch (e) {}
  if (!url || /^javascript:/i.test(url)) { try { el.click(); } catch (e) {} }
}
setTimeout(function () {
  var left = [];
  var all = card.querySelectorAll('*');
  for (var i = 0; i < all.length; i++) {
    for (var j = 0; j < all[i].attributes.length; j++) {
      var a = all[i].attributes[j];
      if (/^on/i.test(a.name) || /^\\s*(javascript|data|vbscript):/i.test(a.value) || a.name === 'srcdoc')
        left.push(all[i].tagName + ' ' + a.name);
    }
  }
  document.getElementById('report').textContent = JSON.stringify(
    {hits: window.hits, title: document.title, href: location.href, left: left,
     tags: Array.prototype.map.call(all, function (e) { return e.tagName.toLowerCase(); })});
}, 1500);
</script></body></html>"""


def _run_card(html: str, tmp_path: Path, name: str) -> dict[str, Any]:
    page = _PAGE.replace("CARD", re.sub("[<>&\u2028\u2029]", lambda m: f"\\u{ord(m[0]):04x}", json.dumps(html)))
    dom, stderr = dump_dom(page, tmp_path, virtual_time_ms=5000, name=name)
    found = re.search(r'<div id="report">(.*?)</div>', dom, re.DOTALL)
    assert found and found[1], f"the probe did not report:\n{dom[-2000:]}\n{stderr[-2000:]}"
    return json.loads(htmllib.unescape(found[1]))


def test_a_hostile_card_runs_no_script_in_chromium(tmp_path: Path):
    assert len(VECTORS) >= 30
    hostile = "\n".join(f"<div>{v}</div>" for v in VECTORS)
    # The vectors are live: unsanitised, the same page runs many of them.
    raw = _run_card(hostile, tmp_path, "raw")
    assert len(set(raw["hits"])) >= 10, raw
    safe = _run_card(cards.sanitize(hostile), tmp_path, "safe")
    assert safe["hits"] == [] and safe["left"] == [], safe
    assert safe["title"] == "card" and safe["href"].endswith("safe.html")
    for tag in ("script", "style", "iframe", "form", "input", "button", "object", "embed", "base", "meta", "link",
                "svg", "math", "template", "noscript", "select", "textarea"):
        assert tag not in safe["tags"]
    assert "div" in safe["tags"] and "a" in safe["tags"]

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from sidecar.tools.render import (
    RenderError,
    inject_html,
    interpolate,
    load_artifact_page,
    render_plan,
)
from tests.chromium import HOSTILE, PROBE_PAGE, probe

SCOPE: dict[str, Any] = {
    "args": {"path": "src/app.py", "items": [{"name": "first"}, {"name": "second"}], "n": 3},
    "return": {
        "port": 5173,
        "a": {"b": {"c": True}},
        "rows": [10, 20, 30],
        "none": None,
        "text": "hello $args.path",
        "1": "one",
    },
    "chat_id": "chat-1",
    "workspace": "/data/chats/chat-1/workspace",
    "toolset": "/data/toolsets/demo",
}


# --- interpolate --------------------------------------------------------------------------------


@pytest.mark.parametrize(("expr", "expected"), [
    ("$args", SCOPE["args"]),
    ("$args.path", "src/app.py"),
    ("$args.n", 3),
    ("$args.items[0].name", "first"),
    ("$args.items.1.name", "second"),
    ("$return", SCOPE["return"]),
    ("$return.port", 5173),
    ("$return.a.b", {"c": True}),
    ("$return.a.b.c", True),
    ("$return.rows", [10, 20, 30]),
    ("$return.rows[2]", 30),
    ("$return.rows.2", 30),
    ("$return.none", None),
    ("$return.1", "one"),
    ("$return[1]", "one"),  # a dict key that looks like an index
    ("$chat_id", "chat-1"),
    ("$workspace", "/data/chats/chat-1/workspace"),
    ("$toolset", "/data/toolsets/demo"),
])
def test_a_whole_expression_keeps_the_type_of_its_value(expr: str, expected: Any):
    value, missing = interpolate(expr, SCOPE)
    assert value == expected and type(value) is type(expected)
    assert missing == []


@pytest.mark.parametrize(("template", "expected"), [
    ("http://localhost:$return.port/x", "http://localhost:5173/x"),
    ("$args.path (copy)", "src/app.py (copy)"),
    ("rows=$return.rows;", "rows=[10, 20, 30];"),
    ("b=$return.a.b", 'b={"c": true}'),
    ("flag $return.a.b.c, none $return.none", "flag true, none null"),
    ("n=$args.n.", "n=3."),  # a trailing '.' ends the sentence, not the path
    ("see $args.path.", "see src/app.py."),
    ("[$args.path]", "[src/app.py]"),
    ("$args.items[0].name/$args.items[1].name", "first/second"),
    ("$chat_id@$workspace", "chat-1@/data/chats/chat-1/workspace"),
    ("ünï $args.path ✓", "ünï src/app.py ✓"),
])
def test_an_expression_inside_a_string_is_written_as_text(template: str, expected: str):
    assert interpolate(template, SCOPE) == (expected, [])


@pytest.mark.parametrize(("template", "expected"), [
    ("$$", "$"),
    ("$$args", "$args"),
    ("costs $$5 and $$args.path", "costs $5 and $args.path"),
    ("$$$args.n", "$3"),
    ("$5 and $ and a trailing $", "$5 and $ and a trailing $"),  # no name after '$'
])
def test_double_dollar_is_a_literal_dollar(template: str, expected: str):
    assert interpolate(template, SCOPE) == (expected, [])


@pytest.mark.parametrize("expr", [
    "$args.nope",
    "$return.rows[3]",  # index out of range
    "$return.rows.99",
    "$return.port.x",  # a step into a number
    "$args.path.x",  # a step into a string
    "$args.path[0]",  # strings are not indexed
    "$return.rows.x",  # a key on a list
    "$args.items[0].name.first",
    "$nothing",  # unknown root
    "$nothing.at.all",
])
def test_a_missing_path_is_none_or_empty_and_is_reported(expr: str):
    assert interpolate(expr, SCOPE) == (None, [expr])
    assert interpolate(f"<{expr}>", SCOPE) == ("<>", [expr])


def test_missing_expressions_are_reported_once_in_order():
    config = {"a": "$args.x", "b": ["$return.y $args.x", {"c": "$return.rows[9]"}], "d": "$args.path"}
    value, missing = interpolate(config, SCOPE)
    assert value == {"a": None, "b": [" ", {"c": None}], "d": "src/app.py"}
    assert missing == ["$args.x", "$return.y", "$return.rows[9]"]


def test_dicts_and_lists_are_walked_but_keys_and_other_values_are_kept():
    config = {"$args.path": ["$return.port", 1, 2.5, True, None, {"x": "$chat_id"}]}
    assert interpolate(config, SCOPE) == ({"$args.path": [5173, 1, 2.5, True, None, {"x": "chat-1"}]}, [])


def test_substituted_values_are_not_interpolated_again():
    assert interpolate("$return.text", SCOPE) == ("hello $args.path", [])
    assert interpolate("say $return.text", SCOPE) == ("say hello $args.path", [])


def test_nothing_is_evaluated():
    scope = {"args": {"__class__": "k"}, "return": None}
    assert interpolate("$args.__class__", scope) == ("k", [])
    assert interpolate("$return.__class__", scope) == (None, ["$return.__class__"])
    assert interpolate("$args.__init__", scope) == (None, ["$args.__init__"])
    assert interpolate("$args[__import__('os')]", scope) == ("{\"__class__\": \"k\"}[__import__('os')]", [])


def test_the_config_is_not_modified():
    config = {"a": ["$args.n"]}
    interpolate(config, SCOPE)
    assert config == {"a": ["$args.n"]}


# --- render_plan --------------------------------------------------------------------------------


@pytest.fixture
def toolset(tmp_path: Path) -> Path:
    root = tmp_path / "toolset"
    (root / "artifacts").mkdir(parents=True)
    (root / "artifacts" / "viz.html").write_text("<html><head></head><body></body></html>", "utf-8")
    return root


def plan(renderer: str | None, config: dict[str, Any] | None, toolset_dir: Path | None = None) -> Any:
    return render_plan(
        renderer, config, args=SCOPE["args"], result=SCOPE["return"], chat_id="chat-1",
        workspace=Path("/data/chats/chat-1/workspace"), toolset_dir=toolset_dir,
    )


def test_no_renderer_means_no_plan():
    assert plan(None, {"file": "$args.path"}) is None


@pytest.mark.parametrize("renderer", ["", "markdown", "HTML", "iframe"])
def test_an_unknown_renderer_is_rejected(renderer: str):
    with pytest.raises(RenderError, match=f"unknown renderer {re.escape(repr(renderer))}.*code, document, html, frame"):
        plan(renderer, {})


def test_a_config_that_is_not_an_object_is_rejected():
    with pytest.raises(RenderError, match="must be an object"):
        plan("code", ["$args.path"])  # type: ignore[arg-type]


def test_code_renderer_with_a_workspace_file():
    config = {"file": "$args.path", "language": "auto", "editable": True}
    assert plan("code", config) == {
        "renderer": "code",
        "config": {"file": "src/app.py", "language": "auto", "editable": True},
        "missing": [],
    }


def test_document_renderer_with_content_and_a_missing_expression():
    assert plan("document", {"content": "$return.body", "editable": False}) == {
        "renderer": "document", "config": {"content": None, "editable": False}, "missing": ["$return.body"],
    }


def test_interpolated_paths_come_from_the_scope():
    assert plan("code", {"content": "$workspace|$toolset|$chat_id"}, Path("/ts"))["config"] == {
        "content": "/data/chats/chat-1/workspace|/ts|chat-1",
    }


@pytest.mark.parametrize("renderer", ["code", "document"])
@pytest.mark.parametrize("file", ["/etc/passwd", "../x", "a/../../x", "src/..", "C:/x", "a\\b", "x\x00y", 5])
def test_code_and_document_reject_files_outside_the_workspace(renderer: str, file: Any):
    with pytest.raises(RenderError, match="file"):
        plan(renderer, {"file": file})


@pytest.mark.parametrize("renderer", ["code", "document"])
def test_code_and_document_need_a_file_or_content(renderer: str):
    with pytest.raises(RenderError, match="needs a file or content"):
        plan(renderer, {"language": "python"})
    with pytest.raises(RenderError, match="needs a file or content"):
        plan(renderer, {"file": "$args.missing"})


def test_html_plan_holds_the_absolute_artifact_and_the_data(toolset: Path):
    expected = os.path.realpath(toolset / "artifacts" / "viz.html")
    for artifact in ("./artifacts/viz.html", "artifacts/viz.html"):
        result = plan("html", {"artifact": artifact, "data": "$return.a"}, toolset)
        assert result == {
            "renderer": "html", "config": {"artifact": expected, "data": {"b": {"c": True}}}, "missing": [],
        }
        assert Path(result["config"]["artifact"]).is_absolute()


def test_html_accepts_a_symlink_that_stays_inside(toolset: Path):
    (toolset / "page.html").symlink_to(toolset / "artifacts" / "viz.html")
    got = plan("html", {"artifact": "page.html"}, toolset)["config"]["artifact"]
    assert got == os.path.realpath(toolset / "artifacts" / "viz.html")


@pytest.mark.parametrize("artifact", [
    "../x", "../toolset/artifacts/viz.html", "artifacts/../../x", "/etc/passwd", "C:/x", "a\\b", "x\x00",
])
def test_html_rejects_artifacts_outside_the_toolset(toolset: Path, artifact: str):
    with pytest.raises(RenderError, match=re.escape(f"artifact {artifact!r}")):
        plan("html", {"artifact": artifact}, toolset)


def test_html_rejects_a_symlink_that_leads_out(toolset: Path, tmp_path: Path):
    secret = tmp_path / "secret.html"
    secret.write_text("secret", "utf-8")
    (toolset / "artifacts" / "out.html").symlink_to(secret)
    (toolset / "linkdir").symlink_to(tmp_path)
    for artifact in ("artifacts/out.html", "linkdir/secret.html"):
        with pytest.raises(RenderError, match=f"artifact '{artifact}' leads out of the toolset directory"):
            plan("html", {"artifact": artifact}, toolset)


def test_html_rejects_a_prefix_sibling_of_the_toolset(toolset: Path, tmp_path: Path):
    sibling = tmp_path / "toolset-evil"
    sibling.mkdir()
    (sibling / "x.html").write_text("x", "utf-8")
    (toolset / "x.html").symlink_to(sibling / "x.html")
    with pytest.raises(RenderError, match="leads out"):
        plan("html", {"artifact": "x.html"}, toolset)


def test_html_needs_an_existing_artifact_and_a_toolset(toolset: Path):
    with pytest.raises(RenderError, match="'artifacts/nope.html' is not a file"):
        plan("html", {"artifact": "artifacts/nope.html"}, toolset)
    with pytest.raises(RenderError, match="'artifacts' is not a file"):
        plan("html", {"artifact": "artifacts"}, toolset)
    with pytest.raises(RenderError, match="needs an artifact"):
        plan("html", {"data": "$return"}, toolset)
    with pytest.raises(RenderError, match="no toolset directory"):
        plan("html", {"artifact": "artifacts/viz.html"}, None)


@pytest.mark.parametrize(("config", "url"), [
    ({"url": "http://localhost:$return.port"}, "http://localhost:5173"),
    ({"url": "https://127.0.0.1:8443/app?x=1#y"}, "https://127.0.0.1:8443/app?x=1#y"),
    ({"url": "http://[::1]:$return.port/"}, "http://[::1]:5173/"),
    ({"url": "HTTP://LOCALHOST/"}, "HTTP://LOCALHOST/"),
    ({"port": "$return.port"}, "http://127.0.0.1:5173/"),
    ({"port": 1}, "http://127.0.0.1:1/"),
    ({"port": 65535}, "http://127.0.0.1:65535/"),
])
def test_frame_to_a_local_server(config: dict[str, Any], url: str):
    assert plan("frame", config)["config"]["url"] == url


@pytest.mark.parametrize("url", [
    "http://example.com/",
    "https://evil.test:5173/",
    "http://localhost.evil.test/",
    "http://127.0.0.2/",
    "http://localhost@evil.test/",
    "http://evil.test\\@localhost/",  # browsers read '\' as '/': the host would be evil.test
    "http://evil.test\t@localhost/",
    "http://user:pw@localhost/",
    "file:///etc/passwd",
    "javascript:alert(1)",
    "ftp://localhost/",
    "//localhost/",
    "localhost:5173",
    "http://localhost:99999/",
    "http://localhost:port/",
    "",
    5173,
])
def test_frame_rejects_urls_that_are_not_local_http(url: Any):
    with pytest.raises(RenderError, match="frame url"):
        plan("frame", {"url": url})


@pytest.mark.parametrize("port", [0, 65536, -1, "5173", 80.0, True, None, "$return.missing"])
def test_frame_rejects_a_bad_port(port: Any):
    with pytest.raises(RenderError, match="url or a port from 1 to 65535"):
        plan("frame", {"port": port})


# --- inject_html ----------------------------------------------------------------------------------

SCRIPT = '<script>window.__TOOL_DATA__ = {"x": 1};</script>'


@pytest.mark.parametrize(("page", "expected"), [
    ("<html><head><title>t</title></head><body></body></html>",
     f"<html><head><title>t</title>{SCRIPT}</head><body></body></html>"),
    ("<HTML><HEAD></HEAD ><BODY></BODY></HTML>", f"<HTML><HEAD>{SCRIPT}</HEAD ><BODY></BODY></HTML>"),
    ('<body class="x" data-a=">">hi</body>', f'<body class="x" data-a=">">{SCRIPT}hi</body>'),
    ("<body\ndata-a='>'>hi", f"<body\ndata-a='>'>{SCRIPT}hi"),
    ('<Body class="x">hi</body>', f'<Body class="x">{SCRIPT}hi</body>'),
    ("<p>fragment</p>", f"{SCRIPT}<p>fragment</p>"),
    ("", SCRIPT),
    ("<bodyguard></bodyguard>", f"{SCRIPT}<bodyguard></bodyguard>"),
])
def test_the_data_goes_before_head_end_else_after_body_else_first(page: str, expected: str):
    assert inject_html(page, {"x": 1}) == expected


def test_the_injected_json_cannot_close_the_script_and_still_decodes():
    data = {"a": "</script><script>x()</script>", "b": "<!--", "c": "\u2028\u2029", "d": "&amp; <b>", "<k>": 1}
    out = inject_html("<head></head>", data)
    payload = out.removeprefix("<head><script>window.__TOOL_DATA__ = ").removesuffix(";</script></head>")
    assert not re.search("[<>&\u2028\u2029]", payload)
    assert "\\u003c/script\\u003e" in payload and "\\u2028\\u2029" in payload and "\\u0026amp;" in payload
    assert json.loads(payload) == data


def test_lone_surrogates_and_non_ascii_are_kept_as_json():
    payload = inject_html("", ["\ud800", "é文"]).removeprefix("<script>window.__TOOL_DATA__ = ")
    assert payload.startswith('["\\ud800", "é文"]')
    payload.encode("utf-8")  # a lone surrogate would not encode


def test_load_artifact_page(toolset: Path):
    (toolset / "artifacts" / "viz.html").write_text("<head><title>ü</title></head>", "utf-8")
    page = load_artifact_page(plan("html", {"artifact": "artifacts/viz.html", "data": "$return.rows"}, toolset),
                              toolset)
    assert page == "<head><title>ü</title><script>window.__TOOL_DATA__ = [10, 20, 30];</script></head>"


def test_load_artifact_page_errors(toolset: Path):
    with pytest.raises(RenderError, match="only an html plan"):
        load_artifact_page(plan("code", {"content": "x"}), toolset)
    html_plan = plan("html", {"artifact": "artifacts/viz.html"}, toolset)
    (toolset / "artifacts" / "viz.html").write_bytes(b"\xff\xfe")
    with pytest.raises(RenderError, match="cannot be read"):
        load_artifact_page(html_plan, toolset)
    (toolset / "artifacts" / "viz.html").unlink()
    with pytest.raises(RenderError, match="cannot be read"):
        load_artifact_page(html_plan, toolset)
    (toolset.parent / "other").mkdir()
    with pytest.raises(RenderError, match="not inside the toolset folder"):
        load_artifact_page(html_plan, toolset.parent / "other")


def test_an_artifact_replaced_after_the_call_is_read_without_following_symlinks(toolset: Path, tmp_path: Path):
    html_plan = plan("html", {"artifact": "artifacts/viz.html"}, toolset)
    secret = tmp_path / "secret.txt"
    secret.write_text("root:x:0:0:secret")
    artifact = toolset / "artifacts" / "viz.html"
    artifact.unlink()
    artifact.symlink_to(secret)
    with pytest.raises(RenderError, match="artifacts/viz.html is a symlink: it is not followed"):
        load_artifact_page(html_plan, toolset)
    # A symlink in place of a folder on the way, even one that leads back inside the toolset.
    (toolset / "real").mkdir()
    (toolset / "real" / "viz.html").write_text("<p>inside</p>")
    (toolset / "artifacts").rename(toolset / "old")
    (toolset / "artifacts").symlink_to(toolset / "real")
    with pytest.raises(RenderError, match="passes through a symlink"):
        load_artifact_page(html_plan, toolset)
    # Not a regular file: a FIFO must not hang the read.
    (toolset / "artifacts").unlink()
    (toolset / "artifacts").mkdir()
    os.mkfifo(toolset / "artifacts" / "viz.html")
    with pytest.raises(RenderError, match="not a regular file"):
        load_artifact_page(html_plan, toolset)


def test_a_symlink_inside_the_toolset_at_call_time_is_read_where_it_led(toolset: Path):
    (toolset / "pages").mkdir()
    (toolset / "pages" / "real.html").write_text("<body>real</body>")
    (toolset / "artifacts" / "link.html").symlink_to(toolset / "pages" / "real.html")
    html_plan = plan("html", {"artifact": "artifacts/link.html", "data": 1}, toolset)
    assert load_artifact_page(html_plan, toolset) == "<body><script>window.__TOOL_DATA__ = 1;</script>real</body>"


# --- a real browser -------------------------------------------------------------------------------


def test_hostile_data_survives_a_real_browser(tmp_path: Path):
    data, pwned = probe(inject_html(PROBE_PAGE, HOSTILE), tmp_path)
    assert data == HOSTILE
    assert pwned == "undefined"

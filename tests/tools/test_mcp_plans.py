"""The render plan an MCP result gets by its content when no override sets one."""

from __future__ import annotations

from sidecar.tools.mcp_plans import default_plan, language_of


def config(result: dict) -> tuple[str, dict]:
    plan = default_plan(result)
    assert plan is not None and plan["missing"] == []
    return plan["renderer"], plan["config"]


def test_text_is_a_document_and_a_fenced_block_is_code():
    assert config({"content": [{"type": "text", "text": "# Notes\n\nbuy milk"}]}) == (
        "document", {"content": "# Notes\n\nbuy milk"})
    assert config({"content": [{"type": "text", "text": "```Python\nprint(1)\n```\n"}]}) == (
        "code", {"content": "print(1)", "language": "python"})


def test_images_are_named_by_position_never_copied():
    renderer, cfg = config({"content": [{"type": "text", "text": "a chart"},
                                        {"type": "image", "data": "AAAA" * 1000, "mimeType": "image/png"}]})
    assert renderer == "image" and cfg == {"images": [{"index": 1, "mimeType": "image/png"}], "caption": "a chart"}


def test_an_embedded_code_resource_is_code_with_its_language():
    result = {"content": [{"type": "resource", "resource": {"uri": "file:///a.rs", "mimeType": "text/x-rust",
                                                            "text": "fn main() {}"}}]}
    assert config(result) == ("code", {"content": "fn main() {}", "language": "rust", "uri": "file:///a.rs"})
    markdown = {"content": [{"type": "resource", "resource": {"uri": "x://n", "mimeType": "text/markdown",
                                                              "text": "# N"}}]}
    assert config(markdown) == ("document", {"content": "# N"})
    assert language_of("application/ld+json") == "json" and language_of("application/octet-stream") == "octet-stream"


def test_links_keep_uri_and_title_and_structured_content_alone_is_json():
    links = {"content": [{"type": "resource_link", "uri": "https://example.com/r.pdf", "name": "r", "title": "Report"},
                         {"type": "resource_link", "uri": "javascript:alert(1)", "name": "bad"}]}
    assert config(links) == ("document",
                             {"content": "[Report](https://example.com/r.pdf)\n\nbad (javascript:alert(1))"})
    assert config({"content": [], "structuredContent": {"a": 1}}) == ("code", {"content": '{\n  "a": 1\n}',
                                                                               "language": "json"})
    assert default_plan({"content": []}) is None and default_plan("text") is None


def test_a_links_title_or_uri_cannot_add_a_link_of_its_own():
    hostile = {"content": [
        {"type": "resource_link", "uri": "https://example.com/a b)(c", "title": "x](javascript:alert(1))"},
        {"type": "resource_link", "uri": "file:///x) [y](javascript:alert(1)", "title": "[z](javascript:alert(2))"}]}
    assert config(hostile) == ("document", {"content": (
        "[x\\](javascript:alert(1))](https://example.com/a%20b%29%28c)\n\n"
        "\\[z\\](javascript:alert(2)) (file:///x) \\[y\\](javascript:alert(1))")})

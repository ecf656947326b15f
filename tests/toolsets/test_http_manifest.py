"""The http block of a tool in toolset.yaml (issue 13): the issue's shape is accepted, and each
mistake is a ManifestError pointing at the field, saying what to write instead."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from sidecar.errors import ManifestError
from sidecar.toolsets.manifest import parse

ISSUE_SHAPE = """
manifest_version: "1"
id: shop
name: Shop
tools:
  - id: get_item
    description: Fetch one item
    input_schema: {type: object, properties: {id: {type: string}}, required: [id]}
    http:
      method: GET
      urlTemplate: "https://api.example.com/items/${id}"
      headers: {X-Api-Key: "${EXAMPLE_API_KEY}"}
      allowedHosts: ["api.example.com"]
"""


def test_the_issues_shape_is_accepted() -> None:
    tool = parse(ISSUE_SHAPE.encode()).manifest.tools[0]
    assert tool.entrypoint is None and tool.http is not None
    assert tool.http.requests()[0].url_template == "https://api.example.com/items/${id}"
    assert tool.http.allowed_hosts == ["api.example.com"]


def with_http(**changes: Any) -> bytes:
    data = yaml.safe_load(ISSUE_SHAPE)
    http = data["tools"][0]["http"]
    for key, value in changes.items():
        if value is None:
            http.pop(key, None)
        else:
            http[key] = value
    return yaml.safe_dump(data).encode()


@pytest.mark.parametrize(("changes", "path", "reason"), [
    ({"urlTemplate": "ftp://api.example.com/x"}, "tools[0].http.urlTemplate", "must start with http:// or https://"),
    ({"urlTemplate": "api.example.com/x"}, "tools[0].http.urlTemplate", "must start with http:// or https://"),
    ({"urlTemplate": "https://${id}.example.com/"}, "tools[0].http.urlTemplate", "${id} is in the host part"),
    ({"urlTemplate": "https://u:p@api.example.com/"}, "tools[0].http.urlTemplate", "user info"),
    ({"urlTemplate": "https://api.example.com/${id"}, "tools[0].http.urlTemplate", "a placeholder is ${name}"),
    ({"urlTemplate": None}, "tools[0].http.urlTemplate", "give the URL to call"),
    ({"allowedHosts": []}, "tools[0].http.allowedHosts", "list the hosts this tool may call"),
    ({"allowedHosts": ["https://api.example.com/"]}, "tools[0].http.allowedHosts[0]", "is not a host name"),
    ({"method": "FETCH"}, "tools[0].http.method", "Invalid enum value 'FETCH'"),
    ({"headers": {"X Bad": "v"}}, "tools[0].http.headers.X Bad", "not a valid header name"),
    ({"body": {"a": "${id}"}}, "tools[0].http.body", "a GET request has no body"),
    ({"timeout": 0}, "tools[0].http.timeout", "Expected `float` > 0.0"),
    ({"maxResponseBytes": 1 << 40}, "tools[0].http.maxResponseBytes", "<="),
    ({"response": {"select": "data.items"}}, "tools[0].http.response.select", "JSON Pointer"),
    ({"urlTemplte": "x"}, "tools[0].http", "unknown field `urlTemplte`"),
    ({"outputSchema": {"type": "thing"}}, "tools[0].http.outputSchema", "not a valid JSON Schema"),
    ({"outputSchema": {"properties": {"a": {"$ref": "https://example.com/a.json"}}}},
     "tools[0].http.outputSchema", "remote references are never fetched"),
    ({"steps": [{"urlTemplate": "https://api.example.com/a/${first.token}"}]},
     "tools[0].http.steps", "either the one request's urlTemplate or steps"),
])
def test_a_bad_http_block_names_the_field(changes: dict[str, Any], path: str, reason: str) -> None:
    with pytest.raises(ManifestError) as err:
        parse(with_http(**changes))
    assert err.value.path == path
    assert reason in err.value.reason


def test_steps_may_only_read_earlier_steps() -> None:
    bad = with_http(urlTemplate=None, steps=[
        {"id": "first", "urlTemplate": "https://api.example.com/a/${second.token}"},
        {"id": "second", "urlTemplate": "https://api.example.com/b"}])
    with pytest.raises(ManifestError) as err:
        parse(bad)
    assert err.value.path == "tools[0].http.steps[0].urlTemplate"
    assert "no earlier step is" in err.value.reason
    good = with_http(urlTemplate=None, steps=[
        {"id": "first", "method": "POST", "urlTemplate": "https://api.example.com/a", "body": {"id": "${id}"}},
        {"id": "second", "urlTemplate": "https://api.example.com/b/${first.token}"}])
    assert len(parse(good).manifest.tools[0].http.steps) == 2  # type: ignore[union-attr] - parsed above


def test_a_tool_is_python_or_http() -> None:
    data = yaml.safe_load(ISSUE_SHAPE)
    data["tools"][0]["entrypoint"] = "tools.shop:get_item"
    with pytest.raises(ManifestError) as err:
        parse(yaml.safe_dump(data).encode())
    assert err.value.path == "tools[0].entrypoint" and "an HTTP tool has no entrypoint" in err.value.reason
    del data["tools"][0]["entrypoint"], data["tools"][0]["http"]
    with pytest.raises(ManifestError) as err:
        parse(yaml.safe_dump(data).encode())
    assert err.value.path == "tools[0]" and "needs an entrypoint" in err.value.reason


def test_a_toolset_can_list_the_allowed_hosts_once() -> None:
    data = yaml.safe_load(ISSUE_SHAPE)
    del data["tools"][0]["http"]["allowedHosts"]
    with pytest.raises(ManifestError) as err:
        parse(yaml.safe_dump(data).encode())
    assert err.value.path == "tools[0].http.allowedHosts"
    data["allowed_hosts"] = ["api.example.com"]
    assert parse(yaml.safe_dump(data).encode()).manifest.tools[0].http.allowed_hosts == ["api.example.com"]  # type: ignore[union-attr] - parsed above

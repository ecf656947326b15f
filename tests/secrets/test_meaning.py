"""Masking by meaning (secrets/masking.py, shapes.py): what a secret looks like is hidden, what a user
needs to read stays readable. Each rule is tested both ways."""

from __future__ import annotations

import pytest

from sidecar.secrets import (
    Placeholders,
    clean,
    known,
    mask_args,
    mask_map,
    mask_text,
    mask_url,
    placeholder_args,
    placeholder_map,
    secret_values,
)


@pytest.mark.parametrize(("args", "shown"), [
    (["--token", "tokA-1111"], ["--token", "****"]),
    (["--api-key", "keyB-2222"], ["--api-key", "****"]),
    (["-k", "tokD-4444"], ["-k", "****"]),
    (["--token=tokE-5555"], ["--token=****"]),
    (["--password", "hunter22", "--secret", "s3", "--auth", "user:pass"],
     ["--password", "****", "--secret", "****", "--auth", "****"]),
    (["--header", "Authorization: Bearer tokC-3333"], ["--header", "Authorization: Bearer ****"]),
    (["--header", "Authorization:", "Bearer", "tokC-3333"], ["--header", "Authorization:", "Bearer", "****"]),
    (["-H", "X-Api-Key=zzzz-1234"], ["-H", "X-Api-Key=****"]),
    (["--header=X-Api-Key: zzzz-1234"], ["--header=X-Api-Key: ****"]),
    (["GITHUB_TOKEN=ghp_abcdefgh12345678"], ["GITHUB_TOKEN=****"]),
    (["sk-live-abcdef12345"], ["****"]),  # no flag says so, its shape does
    (["--url", "https://h/v1/a8F3kq9ZLmx02PqR7tYv/sse?token=x&mode=fast"],
     ["--url", "https://h/v1/****/sse?token=****&mode=fast"]),
])
def test_secret_arguments_are_masked(args: list[str], shown: list[str]) -> None:
    assert mask_args(args) == shown


@pytest.mark.parametrize("args", [
    ["-y", "@modelcontextprotocol/server-memory", "/home/me/notes"],
    ["--port", "8080", "--verbose", "--model", "gpt-4o", "--region=eu"],
    ["--token", "${TOK}"], ["--header", "Authorization: Bearer ${TOK}"],
    ["--no-auth", "server.py"], ["--token-file", "/etc/tok"], ["--auth-url", "https://h/login"],
    ["-H", "X-Team: core"], ["LOG_LEVEL=debug"], ["mcp-server-fetch", "--user-agent", "Mozilla/5.0"],
    ["--author", "Ada Lovelace"], ["/usr/local/bin/python3.12", "-m", "server"],
])
def test_harmless_arguments_stay_readable(args: list[str]) -> None:
    assert mask_args(args) == args


@pytest.mark.parametrize(("url", "shown"), [
    ("https://h/v1/a8F3kq9ZLmx02PqR7tYv/", "https://h/v1/****/"),
    ("https://h/u/ghp_abcdefghijklmnopqr12/x", "https://h/u/****/x"),
    ("https://h/hook/eyJhbGciOiJI.eyJzdWIiOiIx.c2ln", "https://h/hook/****"),
    ("https://h/mcp/550e8400-e29b-41d4-a716-446655440000", "https://h/mcp/****"),
    ("http://user:PASSWORD@h/x?token=t1&sig=s1&code=c1&page=2", "http://****@h/x?token=****&sig=****&code=****&page=2"),
    ("https://ghp_abcdefghijklmnopqr12@github.com/x.git", "https://****@github.com/x.git"),
])
def test_credentials_in_a_url_are_masked(url: str, shown: str) -> None:
    assert mask_url(url) == shown


@pytest.mark.parametrize("url", [
    "https://api.openai.com/v1/chat/completions", "https://h/2024-06-01/items/list-all",
    "https://h/repos/my-org/my_repo_v2/issues/12345", "https://user@h/x", "https://h/mcp?mode=fast&lang=en-US",
    "https://h/api/v2/projects/website-redesign-2024/tasks",
])
def test_ordinary_urls_stay_readable(url: str) -> None:
    assert mask_url(url) == url


def test_env_and_headers_are_masked_by_name_or_shape_and_the_rest_stays_readable() -> None:
    values = {"LOG_LEVEL": "debug", "MEMORY_FILE_PATH": "/tmp/m.json", "X-Team": "core", "REF": "${R}",
              "Authorization": "Bearer ${TOK}", "API_TOKEN": "abc12345", "HELPER": "sk-abcdefg123",
              "DATABASE_URL": "postgres://u:pw@h/db", "X-Auth": "Bearer abcdef"}
    assert mask_map(values) == {"LOG_LEVEL": "debug", "MEMORY_FILE_PATH": "/tmp/m.json", "X-Team": "core",
                                "REF": "${R}", "Authorization": "Bearer ${TOK}", "API_TOKEN": "****",
                                "HELPER": "****", "DATABASE_URL": "postgres://****@h/db", "X-Auth": "Bearer ****"}


def test_exports_give_two_different_secrets_two_names_and_leave_harmless_values() -> None:
    names = Placeholders()
    assert placeholder_map({"TOKEN": "aaaa1111", "LOG_LEVEL": "debug"}, names) == \
        {"TOKEN": "${TOKEN}", "LOG_LEVEL": "debug"}
    assert placeholder_args(["--token", "bbbb2222"], names) == ["--token", "${TOKEN_2}"]
    assert placeholder_args(["--token", "aaaa1111"], names) == ["--token", "${TOKEN}"]  # the same value, the same name
    assert placeholder_map({"Authorization": "Bearer cccc3333"}, names) == {"Authorization": "Bearer ${AUTHORIZATION}"}
    taken = Placeholders(reserved=["SEARCH_API_KEY"])  # the manifest refers to it elsewhere
    assert placeholder_map({"SEARCH_API_KEY": "dddd4444"}, taken) == {"SEARCH_API_KEY": "${SEARCH_API_KEY_2}"}


@pytest.mark.parametrize(("text", "shown"), [
    ("usage: leaky [-h] --token TOKEN", "usage: leaky [-h] --token ****"),
    ("error: unrecognized arguments: --token tokF-6666 --api-key=keyG-7777",
     "error: unrecognized arguments: --token **** --api-key=****"),
    ("GITHUB_TOKEN=ghp_x123456789 LOG_LEVEL=debug HOME=/root OTHER=q9Zr4LmX02pK7tYvW3bN",
     "GITHUB_TOKEN=**** LOG_LEVEL=debug HOME=/root OTHER=****"),
    ("Illegal header value b'Bearer sk-trail-1234\\n'", "Illegal header value b'Bearer ****\\n'"),
    ('HTTP Request: POST http://user:PASSWORD@h/v1/x?token=tt1234 "HTTP/1.1 401"',
     'HTTP Request: POST http://****@h/v1/x?token=**** "HTTP/1.1 401"'),
    ("{'Authorization': 'Bearer abcd-9999', 'x-team': 'core', 'api_key': 'zz-1234'}",
     "{'Authorization': 'Bearer ****', 'x-team': 'core', 'api_key': '****'}"),
    ("sent sk-abcdef1234567 and eyJhbGciOiJI.eyJzdWIiOiIx.sig123.", "sent **** and ****."),
    ('    API_KEY = "plainvalue1"  # in a traceback', '    API_KEY = ****  # in a traceback'),
])
def test_free_text_is_masked_by_shape(text: str, shown: str) -> None:
    assert mask_text(text) == shown


@pytest.mark.parametrize("text", [
    'WWW-Authenticate: Bearer realm="mcp", error="invalid_token"',
    "chat 550e8400e29b41d4a716446655440000 done in 12 ms; tool a-b-c --verbose --port 80",
    "MCP server ts~web: connecting to http://127.0.0.1:8080/mcp?mode=fast",
    "LOG_LEVEL=debug tokens=1200 key_count=3 total = 5",
    "pass --api-key or set OPENAI_API_KEY; use --token to name it",
])
def test_free_text_without_secrets_is_left_alone(text: str) -> None:
    assert mask_text(text) == text


def test_clean_masks_known_values_whatever_their_shape() -> None:
    known.clear()
    try:
        [value] = secret_values(env={"MY_SECRET": "plain-words-here"})
        known.remember(value)
        assert clean("the server said: plain-words-here") == "the server said: ****"
    finally:
        known.clear()

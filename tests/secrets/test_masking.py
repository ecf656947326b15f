"""secrets.py: how URLs are shown in responses, logs and errors, and written in exports."""

from __future__ import annotations

import pytest

from sidecar.secrets import (
    MissingVariable,
    is_reference,
    known,
    mask_json,
    mask_url,
    placeholder_url,
    references,
    resolve,
    resolve_mapping,
    scrub,
)


@pytest.mark.parametrize(("url", "masked"), [
    ("https://h/sse?jwt=eyJabc&session=s3cr3t", "https://h/sse?jwt=****&session=****"),
    ("https://h/mcp?k=sk-live-123", "https://h/mcp?k=****"),
    ("https://h/mcp?ref=sk-live-123456", "https://h/mcp?ref=****"),  # named harmlessly, shaped like a key
    ("https://h/cb#access_token=abc", "https://h/cb#access_token=****"),
    ("https://h/cb#state=abc", "https://h/cb#state=****"),  # every fragment value
    ("https://h/mcp?sk-live-123", "https://h/mcp?****"),
    ("https://h/p#eyJabc", "https://h/p#****"),
    ("https://user:pw@h/mcp?token=t&mode=fast", "https://****@h/mcp?token=****&mode=fast"),
    ("https://h/x?sig=abc&code=def&signature=g1&api_key=k1", "https://h/x?sig=****&code=****&signature=****&api_key=****"),
])
def test_secret_query_values_userinfo_and_the_fragment_are_masked(url: str, masked: str) -> None:
    assert mask_url(url) == masked


def test_references_empty_and_harmless_values_show_as_they_are() -> None:
    url = "https://h/mcp?a=${TOKEN}&b=%24%7BOTHER%7D&c=&d=x&mode=fast&page=2&lang=en-US"
    assert mask_url(url) == url


def test_exports_turn_every_secret_into_a_placeholder_named_after_its_key() -> None:
    assert (placeholder_url("https://u:p@h/sse?jwt=eyJabc&session-id=s3cr3t&ref=${REF}&mode=fast#access_token=abc")
            == "https://${URL_CREDENTIALS}@h/sse?jwt=${JWT}&session-id=${SESSION_ID}&ref=${REF}&mode=fast"
               "#access_token=${ACCESS_TOKEN}")


def test_is_reference_is_the_whole_value() -> None:
    assert is_reference("${TOKEN}")
    assert not is_reference("Bearer ${TOKEN}") and not is_reference("${TOKEN}x") and not is_reference("${1X}")


def test_resolve_reads_every_reference_and_refuses_an_unset_one() -> None:
    env = {"A": "1", "EMPTY": ""}
    assert references("x${A}y${B}") == ["A", "B"]
    assert resolve("x${A}y${EMPTY}z", env) == "x1yz"
    assert resolve_mapping({"k": "${A}", "plain": "v"}, env) == {"k": "1", "plain": "v"}
    with pytest.raises(MissingVariable) as caught:
        resolve("${B}", env)
    assert caught.value.name == "B"


def test_scrub_replaces_known_values_longest_first_and_leaves_short_ones() -> None:
    text = "sent sk-live-123456 and sk-live-123 and abc"
    assert scrub(text, ["sk-live-123", "sk-live-123456", "abc"]) == "sent **** and **** and abc"
    assert scrub("GET https://h/x?token=t1t1 failed", ["https://h/x?token=t1t1"], mask_url) == \
        "GET https://h/x?token=**** failed"


def test_a_placeholder_name_is_one_the_user_can_set_however_long_its_key():
    from sidecar.secrets import Placeholders
    from sidecar.secrets.store import is_user_name

    names = Placeholders(prefix="weather")
    first, second = names("API_KEY_" + "X" * 300, "sk-one-1234567890"), names("API_KEY_" + "X" * 300, "sk-two-1234567890")
    assert first != second
    assert all(is_user_name(n) for n in names.allocated())


def test_a_tools_json_is_masked_by_name_shape_and_known_value_and_stays_readable_otherwise() -> None:
    known.remember("correct-horse-battery-staple")
    try:
        given = {"path": "notes/a.txt", "count": 3, "apiKey": "plain-looking",
                 "headers": {"Authorization": "Bearer abc123456"}, "tokens": ["one", "two"],
                 "note": "the password is correct-horse-battery-staple",
                 "url": "https://h/x?sig=abc&page=2", "ref": "${SHOP_TOKEN}", "any": "sk-live-1234567890",
                 "rows": [{"secret": "s3"}, None, True]}
        assert mask_json(given) == {
            "path": "notes/a.txt", "count": 3, "apiKey": "****", "headers": {"Authorization": "Bearer ****"},
            "tokens": ["****", "****"], "note": "the password is ****", "url": "https://h/x?sig=****&page=2",
            "ref": "${SHOP_TOKEN}", "any": "****", "rows": [{"secret": "****"}, None, True]}
        assert given["apiKey"] == "plain-looking"  # a new value; the one given is untouched
    finally:
        known.forget("correct-horse-battery-staple")


def test_placeholders_give_one_secret_one_name_and_two_secrets_two():
    from sidecar.secrets import Placeholders

    names = Placeholders(["API_KEY"])  # the export already refers to ${API_KEY}: a literal must not take it
    assert names("API_KEY", "sk-one-1234567890") == "${API_KEY_2}"
    assert names("Authorization", "sk-one-1234567890") == "${API_KEY_2}"  # the same secret: asked for once
    assert names("API_KEY", "sk-two-1234567890") == "${API_KEY_3}"
    assert names.allocated() == {"API_KEY_2": "sk-one-1234567890", "API_KEY_3": "sk-two-1234567890"}


def test_a_value_of_the_secret_store_is_written_as_its_name_and_references_stay():
    from sidecar.secrets import stored_as_references

    stored = {"bluebird-garden-path": "GARDEN_PASS", "abcd": "SHORT"}
    assert stored_as_references("--note=bluebird-garden-path", stored) == "--note=${GARDEN_PASS}"
    assert stored_as_references("https://h/x?k=bluebird-garden-path&m=1", stored) == "https://h/x?k=${GARDEN_PASS}&m=1"
    assert stored_as_references("${MY_abcd} and abcd", stored) == "${MY_abcd} and ${SHORT}"
    assert stored_as_references("debug", stored) == "debug"

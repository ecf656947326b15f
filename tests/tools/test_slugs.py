"""Seed 002's slug and version rules (sidecar/tools/slugs.py): what is accepted, what is refused
and what the refusal says, the slug a tool id gives, and the id a put tool gets."""

from __future__ import annotations

import pytest

from sidecar.api.base import is_id
from sidecar.tools import slugs


@pytest.mark.parametrize("slug", ["fetch", "fetch-item", "Fetch", "fetch2", "café", "Größe", "запрос", "検索",
                                  "مرحبا", "x" * 64, "-leading", "٣"])
def test_letters_digits_and_dashes_of_any_script_are_slugs(slug: str) -> None:
    assert slugs.check_slug(slug) == (slug, None)


@pytest.mark.parametrize(("slug", "says"), [
    ("get_item", "has '_'; use '-' instead"),
    ("get item", "has whitespace"),
    ("get\titem", "has whitespace"),
    ("a/b", "has '/'; slashes are not allowed"),
    ("a\\b", "slashes are not allowed"),
    ("smile🙂", "U+1F642 SLIGHTLY SMILING FACE"),
    ("price$", "U+0024 DOLLAR SIGN"),
    ("x" * 65, "is 65 characters long; the limit is 64"),
    ("evil\u202etxt", "U+202E RIGHT-TO-LEFT OVERRIDE"),
    ("zero\u200bwidth", "U+200B ZERO WIDTH SPACE"),
    ("bell\x07", "control character U+0007"),
    ("v1.2", "dots are allowed in versions only"),
    ("a@b", "U+0040 COMMERCIAL AT"),
    ("", "is empty"),
])
def test_what_is_not_a_slug_is_refused_saying_which_character(slug: str, says: str) -> None:
    _, problem = slugs.check_slug(slug)
    assert problem is not None and says in problem


def test_the_rule_counts_runes_not_bytes_and_takes_text_in_nfc() -> None:
    assert slugs.check_slug("é" * 64)[1] is None  # 128 bytes of UTF-8, 64 runes
    assert slugs.check_slug("e\u0301")[0] == "é"  # a combining accent joins its letter
    assert slugs.check_slug("Fetch")[0] != slugs.check_slug("fetch")[0]  # case-sensitive


@pytest.mark.parametrize("version", ["1", "1.2.0", "2024-05-01", "v2", "beta.1", "β"])
def test_versions_may_have_dots(version: str) -> None:
    assert slugs.check_version(version) == (version, None)


@pytest.mark.parametrize(("version", "says"), [
    ("1/2", "slashes are not allowed"), ("1_0", "use '-' instead"), ("1 0", "whitespace"),
    ("1+build", "U+002B PLUS SIGN"), ("9" * 65, "the limit is 64"), ("1\u202e0", "RIGHT-TO-LEFT OVERRIDE"),
])
def test_bad_versions_are_refused(version: str, says: str) -> None:
    _, problem = slugs.check_version(version)
    assert problem is not None and says in problem


@pytest.mark.parametrize(("name", "slug"), [
    ("get_item", "get-item"), ("get.item", "get-item"), ("read_file", "read-file"), ("Search", "Search"),
    ("get weather/now", "get-weather-now"), ("café_au_lait", "café-au-lait"), ("x" * 80, "x" * 64),
])
def test_a_tool_that_names_no_slug_gets_one_from_its_id(name: str, slug: str) -> None:
    assert slugs.derive(name) == slug
    assert slugs.check_slug(slug)[1] is None


@pytest.mark.parametrize("name", ["___", "🙂", "...", "/"])
def test_an_id_with_no_letter_or_digit_still_gets_a_valid_slug_of_its_own(name: str) -> None:
    slug = slugs.derive(name)
    assert slug.startswith("tool-") and slugs.check_slug(slug)[1] is None
    assert slugs.derive("🙃") != slug


def test_a_put_tools_id_part_is_made_of_its_pair_and_follows_the_id_rule() -> None:
    assert slugs.local_id("fetch", "2") == "fetch.2"
    assert slugs.local_id("fetch", "1.2.0") == "fetch.1.2.0"
    # The two pairs that would read alike with a dash stay apart: a slug has no dot.
    assert slugs.local_id("a-b", "c") != slugs.local_id("a", "b-c")
    for slug, version in [("café", "1"), ("x" * 64, "y" * 64), ("-x", "1"), ("検索", "β")]:
        local = slugs.local_id(slug, version)
        assert is_id(local), local
        assert local == slugs.local_id(slug, version)  # stable
    assert slugs.local_id("検索", "1") != slugs.local_id("検索", "2")


def test_palette_refs() -> None:
    assert slugs.parse_ref("fs:read") is None  # a tool id is not a ref
    ref = slugs.parse_ref("+fetch@1.2")
    assert ref is not None and (ref.slug, ref.version) == ("fetch", "1.2")
    ref = slugs.parse_ref("+fetch")
    assert ref is not None and (ref.slug, ref.version) == ("fetch", None)
    with pytest.raises(ValueError, match="has '_'; use '-' instead"):
        slugs.parse_ref("+get_item")
    with pytest.raises(ValueError, match="the version in '\\+x@1/2' has '/'"):
        slugs.parse_ref("+x@1/2")
    with pytest.raises(ValueError, match="is empty"):
        slugs.parse_ref("+x@")


def test_tags_are_trimmed_kept_once_and_checked() -> None:
    assert slugs.check_tags([" web ", "web", "données"]) == (["web", "données"], "", None)
    assert slugs.check_tags(["ok", ""])[1:] == ("[1]", "a tag is 1-64 characters")
    assert "U+202E" in (slugs.check_tags(["a\u202eb"])[2] or "")
    assert slugs.check_tags(["t"] * 33)[2] == "33 tags; the limit is 32"

from __future__ import annotations

import pytest

from sidecar.ndjson import LineSplitter, LineTooLong


def split_all(chunks: list[bytes], cap: int = 10) -> list:
    s = LineSplitter(cap)
    out = []
    for c in chunks:
        out += s.feed(c)
    return out + s.finish()


def test_lines_split_across_and_within_chunks():
    assert split_all([b"ab", b"c\nde", b"f\ngh\n"]) == [b"abc", b"def", b"gh"]


def test_crlf_blank_and_whitespace_lines():
    assert split_all([b"a\r\n\r\n  \n\nb\n"]) == [b"a", b"b"]


def test_last_line_without_newline_counts_at_eof():
    assert split_all([b"a\nbc"]) == [b"a", b"bc"]


@pytest.mark.parametrize("chunks", [
    [b"x" * 25 + b"\nok\n"],                 # in one chunk
    [b"x" * 8, b"x" * 8, b"x" * 9, b"\nok\n"],  # buffered past the cap
    [b"x" * 25, b"xx", b"\n", b"ok\n"],      # skipped over several chunks
])
def test_over_long_line_is_skipped_to_its_newline(chunks):
    out = split_all(chunks)
    assert isinstance(out[0], LineTooLong) and out[0].size >= 11
    assert out[1:] == [b"ok"]


def test_line_exactly_at_the_cap_is_kept():
    assert split_all([b"y" * 10 + b"\n"]) == [b"y" * 10]
    assert isinstance(split_all([b"y" * 11 + b"\n"])[0], LineTooLong)


def test_over_long_unterminated_tail_reports_at_eof():
    out = split_all([b"z" * 50])
    assert len(out) == 1 and isinstance(out[0], LineTooLong)

"""Page tokens a caller could send back wrong: from another list, for other filters, or forged."""

from __future__ import annotations

import base64

import msgspec
import pytest

from sidecar.errors import InvalidParams
from sidecar.paging import Pages


def test_a_token_resumes_after_the_last_row_of_its_page() -> None:
    pages = Pages("tools/list", {"tags": ["a"]}, tuple[str, str])
    rows, token = pages.page([("t1", "x"), ("t2", "y"), ("t3", "z")], 2, lambda r: r)
    assert rows == [("t1", "x"), ("t2", "y")] and token is not None
    assert Pages("tools/list", {"tags": ["a"]}, tuple[str, str]).after(token) == ("t2", "y")
    assert pages.page([("t1", "x")], 2, lambda r: r) == ([("t1", "x")], None)


@pytest.mark.parametrize(("token", "says"), [
    (Pages("chats/list", {}, tuple[str, str]).token(("a", "b")), "made by 'chats/list', not tools/list"),
    (Pages("tools/list", {"tags": ["b"]}, tuple[str, str]).token(("a", "b")), "made for other filters"),
    ("not-a-token!", "not a page token of tools/list"),
    (base64.urlsafe_b64encode(b'["tools/list"]').decode(), "not a page token of tools/list"),
])
def test_a_wrong_token_is_invalid_params_saying_what_to_pass(token: str, says: str) -> None:
    with pytest.raises(InvalidParams, match=says) as e:
        Pages("tools/list", {"tags": ["a"]}, tuple[str, str]).after(token)
    assert e.value.data["path"] == "params.pageToken"


def test_a_forged_position_of_the_wrong_type_is_refused() -> None:
    pages = Pages("tools/list", {}, tuple[str, str])
    forged = base64.urlsafe_b64encode(msgspec.json.encode(["tools/list", pages.digest, [1, {"x": 2}]])).decode()
    with pytest.raises(InvalidParams, match="not a page token"):
        pages.after(forged)

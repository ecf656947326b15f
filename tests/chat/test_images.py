"""What a model is given of an MCP result's pictures, audio and links."""

from __future__ import annotations

import base64

from sidecar.chat import context
from sidecar.chat.images import MAX_BYTES
from sidecar.store.tool_calls import ToolCallRow

SMALL = base64.b64encode(b"\x89PNG" + b"\x00" * 60).decode()
HUGE = "A" * ((50 << 20) * 4 // 3)  # 50 MB once decoded


def message(content: list[dict], view: dict | None = None):
    call = ToolCallRow(id="c1", tool_id="mcp:m~m:picture", chat_id="chat", args={}, status="success",
                       started_at="now", result={"content": content, "isError": False})
    return context.tool_message({"id": "c1", "callId": "p1", "name": "picture", "view": view or {"maxChars": 3000}},
                                call)


def test_a_picture_goes_to_the_model_as_an_image_and_the_text_says_so():
    msg = message([{"type": "text", "text": "radar"}, {"type": "image", "data": SMALL, "mimeType": "image/png"}])
    assert [(i.mime_type, i.data) for i in msg.images] == [("image/png", SMALL)]
    assert "radar\n[image 1: image/png, given to you after this result]" in msg.content


def test_a_50_mb_picture_is_never_sent_and_the_model_hears_why():
    msg = message([{"type": "image", "data": HUGE, "mimeType": "image/png"},
                   {"type": "image", "data": SMALL, "mimeType": "image/bmp"}])
    assert msg.images == []
    assert f"[image image/png: not given to the model: 50.0 MB is over the {MAX_BYTES >> 20} MB a model takes]" \
        in msg.content
    assert "[image image/bmp: not given to the model (it takes image/gif, image/jpeg, image/png, image/webp)]" \
        in msg.content
    assert len(msg.content) < 4000


def test_links_keep_uri_and_title_sound_goes_with_it_and_an_ephemeral_result_has_no_pictures():
    msg = message([{"type": "resource_link", "uri": "https://example.com/r.pdf", "name": "r", "title": "Report",
                    "mimeType": "application/pdf"}, {"type": "audio", "data": SMALL, "mimeType": "audio/wav"}])
    assert "[resource link: Report <https://example.com/r.pdf>, application/pdf]" in msg.content
    assert "[audio 1: audio/wav, given to you after this result]" in msg.content
    assert [a.format for a in msg.audio] == ["wav"]
    gone = message([{"type": "image", "data": SMALL, "mimeType": "image/png"}], {"maxChars": 3000, "ephemeral": True})
    assert gone.images == []

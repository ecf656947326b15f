"""tools/relevant over the real catalog, the real model and a real database: ranking by meaning,
the fallback without a model, vectors cached and embedded again only when a tool's text changes,
fusion, and hostile text."""

from __future__ import annotations

from pathlib import Path

import pytest

from sidecar.client import RemoteError, SidecarClient
from sidecar.tools.ranking import Ranked
from sidecar.tools.relevance import _fused, digest_of, text_of
from tests.tools.search_helpers import install

pytestmark = pytest.mark.anyio

INVALID_PARAMS, NOT_FOUND = -32602, -32010
KIT = {"forecast": "Get the weather forecast (temperature, rain, wind) for a city",
       "stock_quote": "Look up the latest price of a stock by its ticker symbol",
       "send_email": "Send an email message to a recipient",
       "translate": "Translate text from one language to another"}


async def relevant(app: SidecarClient, text: str, **params) -> dict:
    return await app.request("tools/relevant", {"text": text, **params})


async def ids(app: SidecarClient, text: str, **params) -> list[str]:
    return [t["tool"]["id"] for t in (await relevant(app, text, **params))["tools"]]


async def test_tools_rank_by_meaning_with_a_score_and_a_reason(app: SidecarClient, tmp_path: Path):
    await install(app, tmp_path, "kit", KIT)
    answer = await relevant(app, "will it rain in Paris tomorrow?", limit=3)
    assert answer["ranking"] == "fused" and "fallbackReason" not in answer
    top = answer["tools"][0]
    assert top["tool"]["id"] == "kit:forecast" and top["tool"]["description"] == KIT["forecast"]
    assert 0 < top["score"] <= 1 and "close in meaning" in top["why"]
    assert len(answer["tools"]) <= 3
    both = (await relevant(app, "stock quote for AAPL"))["tools"][0]  # found by meaning and by words
    assert both["tool"]["id"] == "kit:stock_quote" and both["score"] == 1.0
    assert "close in meaning" in both["why"] and "words: stock, quote" in both["why"]
    assert (await ids(app, "mail my boss"))[0] == "kit:send_email"  # by words alone: 'mail' is near 'email'
    assert (await ids(app, "what is the stock price of Apple"))[0] == "kit:stock_quote"
    assert (await ids(app, "which language is this written in"))[0] == "kit:translate"
    assert (await ids(app, "open the file notes.txt and read it"))[0] == "read_file"  # built-ins too
    info = (await app.request("debug/info"))["relevanceModel"]
    assert info["loaded"] is True and info["dimension"] == 384 and info["path"].endswith("model.onnx")


async def test_disabled_tools_rank_only_once_enabled_and_nothing_fits_nothing(app: SidecarClient, tmp_path: Path):
    await install(app, tmp_path, "kit", KIT)
    await app.request("tools/setOverride", {"toolsetId": "kit", "toolId": "forecast", "enabled": False})
    assert "kit:forecast" not in await ids(app, "weather forecast for Berlin")
    await app.request("tools/setOverride", {"toolsetId": "kit", "toolId": "forecast", "enabled": True})
    assert (await ids(app, "weather forecast for Berlin"))[0] == "kit:forecast"
    assert await ids(app, "zxqv plonk") == []  # below the threshold for every tool


async def test_only_changed_text_is_embedded_again_and_a_restart_embeds_nothing(data_dir: Path, tmp_path: Path):
    async with SidecarClient.in_process(data_dir, secrets_backend="file") as app:
        await install(app, tmp_path, "kit", KIT)
        await ids(app, "weather")
        first = (await app.request("debug/info"))["relevanceModel"]["embedded"]
        assert first == len(KIT) + 5  # the kit and the five built-ins
        await app.request("tools/setOverride", {"toolsetId": "kit", "toolId": "translate",
                                                "descriptionOverride": "Detect the language of a text"})
        assert (await ids(app, "which language is this written in"))[0] == "kit:translate"
        assert (await app.request("debug/info"))["relevanceModel"]["embedded"] == first + 1
        for _ in range(20):  # the same text set again and again: nothing new to embed
            await app.request("tools/setOverride", {"toolsetId": "kit", "toolId": "send_email", "enabled": True})
            await ids(app, "send an email to my boss")
        assert (await app.request("debug/info"))["relevanceModel"]["embedded"] == first + 1
    async with SidecarClient.in_process(data_dir, secrets_backend="file") as app:
        assert (await ids(app, "send an email to my boss"))[0] == "kit:send_email"
        assert "embedded" not in (await app.request("debug/info"))["relevanceModel"]  # 0: all from the database


async def test_without_a_model_tools_rank_by_words_and_the_reason_is_shown(data_dir: Path, tmp_path: Path):
    broken = tmp_path / "model.onnx"
    broken.write_bytes(b"garbage" * 100)
    async with SidecarClient.in_process(data_dir, secrets_backend="file", embedding_model=str(broken)) as app:
        await install(app, tmp_path, "kit", KIT)
        answer = await relevant(app, "weathr in Paris")
        assert answer["ranking"] == "lexical" and "cannot be loaded" in answer["fallbackReason"]
        assert [t["tool"]["id"] for t in answer["tools"]] == ["kit:forecast"]  # by words (a typo corrected)
        assert "by words only" in answer["tools"][0]["why"]
        info = (await app.request("debug/info"))["relevanceModel"]
        assert info["loaded"] is False and info["state"] == "unavailable"
        assert "cannot be loaded" in info["fallbackReason"]
        assert (await app.request("tools/list"))["tools"]  # still serving
    async with SidecarClient.in_process(data_dir, secrets_backend="file", embedding_model="none") as app:
        answer = await relevant(app, "weather in Paris")
        assert answer["ranking"] == "lexical" and "switched off" in answer["fallbackReason"]


async def test_hostile_text(app: SidecarClient, tmp_path: Path):
    await install(app, tmp_path, "kit", KIT)
    assert await ids(app, "😀🔥 \u200f\u200e\u202e") == []
    assert await ids(app, "   ") == []
    long = "weather forecast for Berlin".ljust(16_384, "\u200f")  # 16 KiB, padded with direction marks
    assert (await ids(app, long))[0] == "kit:forecast"
    assert isinstance(await ids(app, ("stock " * 3000)[:16_384]), list)  # a pasted page: served, whatever ranks
    assert (await ids(app, "\u202eweather\u200f forecast 😀"))[0] == "kit:forecast"
    with pytest.raises(RemoteError) as err:
        await relevant(app, "x" * 16_385)
    assert err.value.code == INVALID_PARAMS
    with pytest.raises(RemoteError) as err:
        await relevant(app, "weather", limit=0)
    assert err.value.code == INVALID_PARAMS


async def test_a_megabyte_description_is_embedded_as_its_first_part(app: SidecarClient, tmp_path: Path):
    huge = "Weather forecast for a city. " + "x" * ((1 << 20) - 4096)  # just under the manifest's cap
    await install(app, tmp_path, "big", {"forecast": huge})
    assert (await ids(app, "what's the weather"))[0] == "big:forecast"


async def test_with_a_chat_only_what_it_offers_ranks(app: SidecarClient, tmp_path: Path):
    await install(app, tmp_path, "kit", KIT)
    chat = (await app.request("chats/create", {}))["chat"]["id"]
    assert (await ids(app, "weather forecast", chatId=chat))[0] == "kit:forecast"
    await app.request("toolsets/setEnabled", {"id": "kit", "enabled": False})
    assert "kit:forecast" not in await ids(app, "weather forecast", chatId=chat)
    with pytest.raises(RemoteError) as err:
        await relevant(app, "weather", chatId="no-such-chat")
    assert err.value.code == NOT_FOUND


def test_fusion_puts_agreement_first_and_scores_the_best_one():
    meaning = [Ranked("a", 0.8, "close in meaning (0.80)"), Ranked("b", 0.6, "close in meaning (0.60)")]
    words = [Ranked("b", 1.0, "matches 'stock'"), Ranked("c", 0.5, "matches 'price'")]
    fused = _fused([meaning, words], 10)
    assert [r.tool_id for r in fused] == ["b", "a", "c"]  # found by both beats first in one
    assert fused[0].why == "close in meaning (0.60); matches 'stock'"
    assert all(0 < r.score <= 1 for r in fused) and fused[0].score > fused[1].score
    only = _fused([meaning, []], 1)  # one side found nothing: its best scores 1
    assert [(r.tool_id, r.score) for r in only] == [("a", 1.0)]
    assert _fused([[], []], 5) == []


def test_the_embedded_text_holds_parameters_and_tags_and_is_bounded():
    from sidecar.api.tools import Tool

    tool = Tool(id="kit:stock_quote", toolset_id="kit", provider="http", requires_confirmation=False, enabled=True,
                name="stock_quote", description="d" * 10**6,
                input_schema={"type": "object", "properties": {"ticker": {"description": "symbol like AAPL"}}},
                tags=["finance"])
    text = text_of(tool)
    assert text.startswith("stock quote") and len(text) <= 4096
    assert digest_of(text) == digest_of(text_of(tool))
    short = text_of(Tool(id="kit:q", toolset_id="kit", provider="http", requires_confirmation=False, enabled=True,
                         name="q", description="quote",
                         input_schema={"type": "object", "properties": {"ticker": {"description": "symbol"}}},
                         tags=["finance"]))
    assert "ticker: symbol" in short and "Tags: finance" in short

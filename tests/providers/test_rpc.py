"""providers/* through the real sidecar process: keys go in, only masks come out (nor in its log)."""

from __future__ import annotations

import json

import pytest

from sidecar.client import RemoteError, SidecarClient

pytestmark = pytest.mark.anyio

SECRET_KEY = "sk-proj-Zq81vKx0c2Lm7Tn4Rb9Wd3Ye6Hu5"
SECRET_HEADER = "org-secret-7b1f4c9e2a"


async def providers(sc: SidecarClient) -> tuple[dict[str, dict], str]:
    listed = await sc.request("providers/list")
    return {p["id"]: p for p in listed["providers"]}, listed["defaultId"]


async def test_scripted_is_listed_as_the_builtin_default(sidecar: SidecarClient):
    listed = await sidecar.request("providers/list")
    assert listed == {"defaultId": "scripted", "providers": [
        {"id": "scripted", "kind": "scripted", "hasApiKey": False, "config": {}, "isDefault": True, "builtIn": True}]}
    denied = await sidecar.request_raw("providers/remove", {"id": "scripted"})
    assert denied["error"]["code"] == -32012 and "cannot be removed" in denied["error"]["message"]


async def test_a_key_is_stored_but_only_ever_shown_masked(sidecar: SidecarClient):
    params = {"id": "openai-main", "kind": "openai", "baseUrl": "https://api.example.test/v1", "apiKey": SECRET_KEY,
              "defaultModel": "gpt-4.1-mini",
              "config": {"timeout": 30, "maxRetries": 1, "headers": {"OpenAI-Organization": SECRET_HEADER}}}
    seen = [await sidecar.request("providers/set", params)]
    provider = seen[0]["provider"]
    assert provider["apiKey"] == "sk-…6Hu5" and provider["hasApiKey"] is True
    # The header is a secret of its own now (secrets/list shows it): the provider refers to it.
    assert provider["config"] == {"timeout": 30, "maxRetries": 1,
                                  "headers": {"OpenAI-Organization": "${OPENAI_MAIN_OPENAI_ORGANIZATION}"}}
    assert provider["baseUrl"] == "https://api.example.test/v1" and provider["defaultModel"] == "gpt-4.1-mini"
    assert provider["isDefault"] is False and provider["builtIn"] is False and provider["updatedAt"]

    seen.append(await sidecar.request("providers/list"))
    listed, default_id = await providers(sidecar)
    assert default_id == "scripted" and listed["openai-main"]["apiKey"] == "sk-…6Hu5"

    # Absent apiKey keeps the stored key; the masked header sent back keeps its value too.
    params.pop("apiKey")
    params["config"] = provider["config"]
    seen.append(await sidecar.request("providers/set", params | {"defaultModel": "gpt-4.1"}))
    assert seen[-1]["provider"]["apiKey"] == "sk-…6Hu5" and seen[-1]["provider"]["defaultModel"] == "gpt-4.1"

    ref = await sidecar.request("providers/set",
                                {"id": "claude", "kind": "anthropic", "apiKey": "${ANTHROPIC_API_KEY}"})
    assert ref["provider"]["apiKey"] == "${ANTHROPIC_API_KEY}"  # a reference, not a secret
    removed = await sidecar.request("providers/set", {"id": "claude", "kind": "anthropic", "apiKey": None})
    assert "apiKey" not in removed["provider"] and removed["provider"]["hasApiKey"] is False

    info = await sidecar.request("debug/info")
    assert not {"openai", "anthropic"} & set(info["heavyModulesLoaded"])  # nothing connected: no SDK imported
    await sidecar.request("shutdown")
    for answer in seen:
        text = json.dumps(answer)
        assert SECRET_KEY not in text and SECRET_HEADER not in text
    log = sidecar.stderr_text()
    assert "openai-main" in log  # the log is there (debug level) ...
    assert SECRET_KEY not in log and SECRET_HEADER not in log  # ... and holds no secret


async def test_the_default_moves_and_falls_back_to_scripted(sidecar: SidecarClient):
    await sidecar.request("providers/set", {"id": "claude", "kind": "anthropic", "apiKey": SECRET_KEY})
    chosen = await sidecar.request("providers/setDefault", {"id": "claude"})
    assert chosen["provider"]["id"] == "claude" and chosen["provider"]["isDefault"] is True
    listed, default_id = await providers(sidecar)
    assert default_id == "claude" and listed["claude"]["isDefault"] and not listed["scripted"]["isDefault"]

    assert await sidecar.request("providers/remove", {"id": "claude"}) == {}
    listed, default_id = await providers(sidecar)
    assert default_id == "scripted" and list(listed) == ["scripted"]


async def test_bad_requests_get_the_matching_errors(sidecar: SidecarClient):
    bad_id = await sidecar.request_raw("providers/set", {"id": "no spaces", "kind": "openai"})
    assert bad_id["error"]["code"] == -32602 and bad_id["error"]["data"]["path"] == "params.id"
    bad_kind = await sidecar.request_raw("providers/set", {"id": "x", "kind": "gemini"})
    assert bad_kind["error"]["code"] == -32602
    bad_config = await sidecar.request_raw("providers/set", {"id": "x", "kind": "openai",
                                                             "config": {"maxRetries": "many"}})
    assert bad_config["error"]["data"]["path"] == "params.config.maxRetries"
    for method in ("providers/remove", "providers/setDefault"):
        missing = await sidecar.request_raw(method, {"id": "ghost"})
        assert missing["error"]["code"] == -32010
        assert missing["error"]["data"] == {"kind": "provider", "id": "ghost"}
    with pytest.raises(RemoteError):
        await sidecar.request("providers/remove", {"id": "scripted"})

"""Seed 004's constraints and sandbox settings (issue 15, item 2): read from toolset.yaml per toolset
and per tool, overridden by the user (tool over toolset, user over manifest), shown by tools/get with
where each value came from, warned about by toolsets/inspect before install, and the timeout
actually applied to a Python tool's call."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from sidecar.client import SidecarClient
from sidecar.sandbox import settings as sandbox_settings
from sidecar.sandbox.policy import Patch
from sidecar.toolsets.manifest import ManifestError, from_data

pytestmark = pytest.mark.anyio

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "toolsets"
SANDBOXED = FIXTURES / "sandbox-settings"
WEATHER = FIXTURES / "weather"


def manifest(top: dict[str, Any] | None = None, **tool: Any) -> dict[str, Any]:
    return {"manifest_version": "1", "id": "t", "name": "T", **(top or {}),
            "tools": [{"id": "a", "entrypoint": "tools.a:a", **tool}]}


# -- toolset.yaml -------------------------------------------------------------------------------

def test_both_levels_are_read_in_seed_004s_spelling():
    parsed = from_data(manifest({"constraints": {"timeout_seconds": 5}, "sandbox": {"memory": "512m"}},
                                constraints={"timeout_seconds": 2},
                                sandbox={"network": "allowedHosts", "allowedHosts": ["API.example.com:443"],
                                         "writable": ["/srv/out/"], "processes": 8, "disk": "2g"}))
    assert parsed.limits == Patch(timeout_seconds=5.0, memory_bytes=512 << 20)
    assert parsed.tool_limits["a"] == Patch(timeout_seconds=2.0, network="allowedHosts",
                                            allowed_hosts=("api.example.com:443",), writable=("/srv/out",),
                                            max_processes=8, disk_bytes=2 << 30)


def test_timeout_is_an_alias_of_constraints_timeout_seconds():
    assert from_data(manifest(timeout=20)).tool_limits["a"] == Patch(timeout_seconds=20.0)
    with pytest.raises(ManifestError) as err:
        from_data(manifest(timeout=20, constraints={"timeout_seconds": 3}))
    assert err.value.path == "tools[0].timeout" and "keep one of the two" in err.value.reason


def test_seed_004s_cost_budget_is_accepted_with_a_warning():
    parsed = from_data(manifest({"constraints": {"timeout_seconds": 9, "cost_budget": 1000}}))
    assert any("cost_budget is not enforced" in w for w in parsed.warnings)


@pytest.mark.parametrize(("top", "tool", "path", "reason"), [
    (None, {"sandbox": {"memory": "lots"}}, "tools[0].sandbox.memory", "write bytes or a number with k, m or g"),
    (None, {"sandbox": {"memory": "1m"}}, "tools[0].sandbox.memory", "out of range: from 32m"),
    ({"sandbox": {"network": "bridge"}}, None, "sandbox.network", "Docker network mode; write 'full'"),
    ({"sandbox": {"network": "open"}}, None, "sandbox.network", "none (the default), allowedHosts"),
    (None, {"sandbox": {"allowedHosts": ["https://api.example.com"]}}, "tools[0].sandbox.allowedHosts[0]",
     "is not a host name"),
    (None, {"sandbox": {"network": "full", "allowedHosts": ["a.example"]}}, "tools[0].sandbox.allowedHosts",
     "set network: allowedHosts"),
    (None, {"sandbox": {"writable": ["reports"]}}, "tools[0].sandbox.writable[0]", "is relative"),
    (None, {"sandbox": {"writable": ["/"]}}, "tools[0].sandbox.writable[0]", "the whole filesystem"),
    (None, {"sandbox": {"writable": ["/srv/../etc"]}}, "tools[0].sandbox.writable[0]", "holds '..'"),
    (None, {"sandbox": {"writable": ["~/out"]}}, "tools[0].sandbox.writable[0]", "write the absolute path"),
    (None, {"sandbox": {"writable": True}}, "tools[0].sandbox.writable", "list the folders"),
    (None, {"sandbox": {"processes": 0}}, "tools[0].sandbox.processes", "a whole number from 1"),
    (None, {"sandbox": {"cpu": 2}}, "tools[0].sandbox.cpu", "not a sandbox setting"),
    (None, {"constraints": {"timeout_seconds": 0}}, "tools[0].constraints.timeout_seconds", "more than 0"),
    ({"constraints": {"timeout": 5}}, None, "constraints.timeout", "takes timeout_seconds"),
    (None, {"http": {"method": "GET", "urlTemplate": "https://api.example.com/x", "allowedHosts": ["api.example.com"]},
            "entrypoint": None, "sandbox": {"network": "full"}}, "tools[0].sandbox", "runs in no process"),
])
def test_mistakes_name_the_setting_and_what_to_write(top: Any, tool: Any, path: str, reason: str):
    with pytest.raises(ManifestError) as err:
        from_data(manifest(top, **(tool or {})))
    assert err.value.path == path
    assert reason in err.value.reason


def test_a_writable_path_in_or_above_the_data_directory_is_refused(tmp_path: Path):
    data = tmp_path / "data"
    for path in (str(data), str(data / "chats"), str(tmp_path)):
        with pytest.raises(ValueError, match="data directory"):
            sandbox_settings.check_writable(path, data)
    assert sandbox_settings.check_writable(str(tmp_path / "elsewhere"), data) == str(tmp_path / "elsewhere")


def test_the_whole_home_folder_is_refused_a_folder_in_it_is_not(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(ValueError, match="whole home folder"):
        sandbox_settings.check_writable(str(tmp_path) + "/")
    assert sandbox_settings.check_writable(str(tmp_path / "reports")) == str(tmp_path / "reports")


# -- through the app ------------------------------------------------------------------------------

async def test_inspect_warns_of_each_widening_before_install(app: SidecarClient):
    found = await app.request("toolsets/inspect", {"path": str(SANDBOXED)})
    tools = {t["id"]: t for t in found["tools"]}
    quick = tools["sandbox-settings:quick"]
    assert quick["limits"]["timeoutSeconds"] == 1 and quick["limits"]["network"] == "allowedHosts"
    assert quick["limits"]["sources"]["memoryBytes"] == "manifest"  # the toolset's 512m
    assert {w["setting"] for w in quick["limitWarnings"]} == {"sandbox.network", "sandbox.memory"}
    reporter = {w["setting"]: w["message"] for w in tools["sandbox-settings:reporter"]["limitWarnings"]}
    assert "/srv/sandbox-settings-reports" in reporter["sandbox.writable"]
    assert "20 s" in reporter["constraints.timeout_seconds"]
    assert any(w.startswith("sandbox-settings:quick: may connect to api.weather.example") for w in found["warnings"])
    assert (await app.request("toolsets/list", {}))["toolsets"] == []  # nothing installed


async def test_inspect_refuses_a_writable_data_directory(app: SidecarClient, data_dir: Path, tmp_path: Path):
    bundle = tmp_path / "bundle"
    shutil.copytree(SANDBOXED, bundle)
    text = (bundle / "toolset.yaml").read_text().replace("/srv/sandbox-settings-reports", str(data_dir / "chats"))
    (bundle / "toolset.yaml").write_text(text)
    for method in ("toolsets/inspect", "toolsets/import"):
        refused = await app.request_raw(method, {"path": str(bundle)})
        assert refused["error"]["code"] == -32013, refused  # InvalidBundle
        assert "sandbox.writable[0]" in refused["error"]["message"]
        assert "data directory" in refused["error"]["message"]


async def test_tools_get_shows_the_effective_limits_and_their_sources(app: SidecarClient):
    installed = await app.request("toolsets/import", {"path": str(SANDBOXED)})
    inspected = await app.request("toolsets/inspect", {"path": str(SANDBOXED)})
    assert installed["limitWarnings"] == [w for t in inspected["tools"] for w in t.get("limitWarnings", [])]
    nap = (await app.request("tools/get", {"id": "sandbox-settings:nap"}))["tool"]["limits"]
    assert (nap["timeoutSeconds"], nap["memoryBytes"], nap["maxProcesses"], nap["network"]) == (5, 512 << 20, 64,
                                                                                                 "none")
    assert nap["sources"] == {"timeoutSeconds": "manifest", "memoryBytes": "manifest", "maxProcesses": "default",
                              "diskBytes": "default", "network": "default", "allowedHosts": "default",
                              "writable": "default"}
    reporter = (await app.request("tools/get", {"id": "sandbox-settings:reporter"}))["tool"]["limits"]
    assert reporter["timeoutSeconds"] == 20 and reporter["maxProcesses"] == 8  # the `timeout` alias
    assert reporter["writable"] == ["/srv/sandbox-settings-reports"]
    patient = (await app.request("tools/get", {"id": "sandbox-settings:patient"}))["tool"]["limits"]
    assert (patient["timeoutSeconds"], patient["sources"]["timeoutSeconds"]) == (2, "manifest")  # @tool(timeout=2)
    assert "limits" not in (await app.request("tools/get", {"id": "read_file"}))["tool"]  # runs in the sidecar
    assert (await app.request("tools/get", {"id": "run_command"}))["tool"]["limits"]["network"] == "none"


async def test_the_users_settings_win_tool_over_toolset_over_manifest(app: SidecarClient):
    await app.request("toolsets/import", {"path": str(SANDBOXED)})
    shown = await app.request("toolsets/setLimits", {"id": "sandbox-settings", "constraints": {"timeoutSeconds": 3},
                                                     "sandbox": {"network": "full"}})
    assert shown["manifest"] == {"constraints": {"timeoutSeconds": 5}, "sandbox": {"memory": 512 << 20}}
    assert shown["user"] == {"constraints": {"timeoutSeconds": 3}, "sandbox": {"network": "full"}}
    assert {(w["toolId"], w["setting"]) for w in shown["warnings"]} >= {("sandbox-settings:nap", "sandbox.network")}
    tool = (await app.request("tools/setOverride", {"toolsetId": "sandbox-settings", "toolId": "quick",
                                                    "sandbox": {"memory": "64m"}}))["tool"]
    quick = tool["limits"]
    # The tool's own manifest timeout (1 s) loses to the user's toolset-wide 3 s; its network too.
    assert (quick["timeoutSeconds"], quick["sources"]["timeoutSeconds"]) == (3, "user")
    assert (quick["network"], quick["sources"]["network"]) == ("full", "user")
    assert (quick["memoryBytes"], quick["sources"]["memoryBytes"]) == (64 << 20, "user")
    nap = (await app.request("tools/get", {"id": "sandbox-settings:nap"}))["tool"]["limits"]
    assert nap["memoryBytes"] == 512 << 20 and nap["sources"]["memoryBytes"] == "manifest"
    # A null key gives the value back to the layer below; a null block, all of them.
    quick = (await app.request("tools/setOverride", {"toolsetId": "sandbox-settings", "toolId": "quick",
                                                     "sandbox": {"memory": None}}))["tool"]["limits"]
    assert quick["memoryBytes"] == 512 << 20
    shown = await app.request("toolsets/setLimits", {"id": "sandbox-settings", "sandbox": None, "constraints": None})
    assert "user" not in shown
    quick = (await app.request("tools/get", {"id": "sandbox-settings:quick"}))["tool"]["limits"]
    assert (quick["timeoutSeconds"], quick["network"]) == (1, "allowedHosts")
    # They outlive an upgrade.
    await app.request("tools/setOverride", {"toolsetId": "sandbox-settings", "toolId": "nap",
                                            "constraints": {"timeoutSeconds": 7}})
    await app.request("toolsets/import", {"path": str(SANDBOXED), "replace": True})
    nap = (await app.request("tools/get", {"id": "sandbox-settings:nap"}))["tool"]["limits"]
    assert (nap["timeoutSeconds"], nap["sources"]["timeoutSeconds"]) == (7, "user")


@pytest.mark.parametrize(("params", "where", "reason"), [
    ({"sandbox": {"memory": "huge"}}, "params.sandbox.memory", "write bytes or a number"),
    ({"sandbox": {"writable": ["relative/dir"]}}, "params.sandbox.writable[0]", "is relative"),
    ({"sandbox": {"allowedHosts": ["not a host"]}}, "params.sandbox.allowedHosts[0]", "is not a host name"),
    ({"constraints": {"timeoutSeconds": -1}}, "params.constraints.timeoutSeconds", "more than 0"),
])
async def test_a_users_bad_setting_is_refused_naming_it(app: SidecarClient, params: dict[str, Any], where: str,
                                                        reason: str):
    await app.request("toolsets/import", {"path": str(SANDBOXED)})
    for method, target in (("tools/setOverride", {"toolsetId": "sandbox-settings", "toolId": "nap"}),
                           ("toolsets/setLimits", {"id": "sandbox-settings"})):
        refused = await app.request_raw(method, {**target, **params})
        assert refused["error"]["code"] == -32602, refused
        assert refused["error"]["data"]["path"] == where and reason in refused["error"]["message"], refused


async def test_the_data_directory_is_no_users_writable_path(app: SidecarClient, data_dir: Path):
    await app.request("toolsets/import", {"path": str(SANDBOXED)})
    refused = await app.request_raw("toolsets/setLimits", {"id": "sandbox-settings",
                                                           "sandbox": {"writable": [str(data_dir)]}})
    assert refused["error"]["code"] == -32602 and "data directory" in refused["error"]["message"]


async def test_an_unknown_toolset_has_no_limits(app: SidecarClient):
    for method in ("toolsets/getLimits", "toolsets/setLimits"):
        missing = await app.request_raw(method, {"id": "nowhere"})
        assert missing["error"]["code"] == -32010, missing  # NotFound


async def test_a_frozen_toolset_refuses_sandbox_settings(app: SidecarClient):
    await app.request("toolsets/import", {"path": str(SANDBOXED)})
    await app.request("toolsets/setEnabled", {"id": "sandbox-settings", "enabled": False})
    for method, params in (("toolsets/setLimits", {"id": "sandbox-settings", "sandbox": {"network": "full"}}),
                           ("tools/setOverride", {"toolsetId": "sandbox-settings", "toolId": "nap",
                                                  "sandbox": {"network": "full"}})):
        refused = await app.request_raw(method, params)
        assert refused["error"]["code"] == -32011 and "toolsets/setEnabled" in refused["error"]["message"], method
    await app.request("toolsets/setEnabled", {"id": "sandbox-settings", "enabled": True})
    nap = (await app.request("tools/get", {"id": "sandbox-settings:nap"}))["tool"]["limits"]
    assert nap["network"] == "none"


async def test_only_one_python_tool_takes_sandbox_settings(app: SidecarClient):
    await app.request("toolsets/import", {"path": str(SANDBOXED)})
    pattern = await app.request_raw("tools/setOverride", {"toolsetId": "sandbox-settings", "toolId": "*",
                                                          "sandbox": {"network": "full"}})
    assert pattern["error"]["code"] == -32602 and "toolsets/setLimits" in pattern["error"]["message"]
    builtin = await app.request_raw("tools/setOverride", {"toolsetId": "builtin", "toolId": "run_command",
                                                          "sandbox": {"network": "full"}})
    assert builtin["error"]["code"] == -32012  # PermissionDenied: built-ins are read-only but enabled
    await app.request("toolsets/import", {"path": str(FIXTURES / "http_example")})
    http = await app.request_raw("tools/setOverride", {"toolsetId": "http_example", "toolId": "get_item",
                                                       "constraints": {"timeoutSeconds": 3}})
    assert http["error"]["code"] == -32602 and "http.allowedHosts" in http["error"]["message"], http


async def test_a_tool_past_its_timeout_fails_with_timeout(sidecar: SidecarClient):
    """Through the real process: the manifest's 1 s (not the old 60 s default) ends the call."""
    await sidecar.request("toolsets/import", {"path": str(SANDBOXED)})
    done = (await sidecar.request("tools/call", {"toolId": "sandbox-settings:quick", "args": {"seconds": 0.1}}))
    assert done["toolCall"]["status"] == "success"
    call = (await sidecar.request("tools/call", {"toolId": "sandbox-settings:quick", "args": {"seconds": 30}},
                                  timeout=20))["toolCall"]
    assert call["status"] == "error" and call["errorKind"] == "timeout", call
    # The user's longer timeout wins over the manifest's.
    await sidecar.request("tools/setOverride", {"toolsetId": "sandbox-settings", "toolId": "quick",
                                                "constraints": {"timeoutSeconds": 4}})
    done = await sidecar.request("tools/call", {"toolId": "sandbox-settings:quick", "args": {"seconds": 1.5}})
    assert done["toolCall"]["status"] == "success", done


async def test_an_export_keeps_the_manifests_settings(app: SidecarClient, tmp_path: Path):
    await app.request("toolsets/import", {"path": str(SANDBOXED)})
    installed = {t["id"]: t["limits"] for t in (await app.request("toolsets/get", {"id": "sandbox-settings"}))["tools"]}
    await app.request("toolsets/setLimits", {"id": "sandbox-settings", "sandbox": {"network": "full"}})
    dest = tmp_path / "out.zip"
    await app.request("toolsets/export", {"id": "sandbox-settings", "path": str(dest)})
    again = {t["id"]: t["limits"] for t in (await app.request("toolsets/inspect", {"path": str(dest)}))["tools"]}
    # As installed (@tool(timeout=2) written out as the manifest's); the user's setting stays on this machine.
    assert again == installed
    assert again["sandbox-settings:reporter"]["timeoutSeconds"] == 20

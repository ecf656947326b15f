"""Which sandbox is active, found by trying it; 'none' says so loudly."""

from __future__ import annotations

import pytest

from sidecar.client import SidecarClient
from sidecar.sandbox import cgroups
from sidecar.sandbox.detect import detect

pytestmark = pytest.mark.anyio


def test_none_is_unconfined_with_a_warning() -> None:
    found = detect("none")
    assert found.mechanism == "none" and not found.confined
    assert found.warning and "unconfined" in found.warning


def test_bubblewrap_is_chosen_first_where_it_runs(bwrap: str) -> None:
    assert detect("auto").mechanism == "bubblewrap"


async def test_status_reports_the_sandbox_in_initialize_and_debug_info(data_dir, bwrap: str) -> None:  # noqa: ANN001
    async with SidecarClient.spawn(data_dir, initialize=False, env={"SIDECAR_SANDBOX": "none"}) as sidecar:
        init = await sidecar.request("initialize", {"clientInfo": {"name": "t", "version": "0"}})
        assert init["capabilities"]["sandbox"] == {"mechanism": "none", "confined": False}
        info = (await sidecar.request("debug/info"))["sandbox"]
        assert info["mechanism"] == "none" and "unconfined" in info["warning"]
        assert "NO SANDBOX" in sidecar.stderr_text() or "unconfined" in sidecar.stderr_text()
    async with SidecarClient.spawn(data_dir) as sidecar:
        info = (await sidecar.request("debug/info"))["sandbox"]
        assert info["mechanism"] == "bubblewrap" and info["confined"] is True and "warning" not in info
        # What enforces memory and processes: the cgroups this machine lets the sidecar use.
        assert info["limits"] == cgroups.detect().kind

"""Windows' Job Object part cannot run here; what status says is not confined can be read."""

from sidecar.sandbox import windows
from sidecar.sandbox.policy import Confinement


def test_status_says_plainly_what_windows_does_not_confine() -> None:
    told = windows.describe(Confinement(memory_bytes=512 << 20, max_processes=8))
    assert told["confined"] == {"memory_bytes": 512 << 20, "max_processes": 8, "kill_on_close": True}
    not_confined = " ".join(map(str, told["not_confined"]))  # type: ignore[arg-type] -- a list of str, typed object for status
    for setting in ("sandbox.writable", "sandbox.network", "the sidecar included"):
        assert setting in not_confined
    assert not hasattr(windows, "confine")  # the ctypes part exists only on Windows

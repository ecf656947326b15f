"""Headless Chromium for the tests that must see what a real browser makes of a page."""

from __future__ import annotations

import html as htmllib
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

# Shows window.__TOOL_DATA__ and whether injected data managed to run script of its own.
PROBE_PAGE = """<!doctype html><html><head></head><body><div id=out></div><div id=status></div>
<script>
document.getElementById('out').textContent = JSON.stringify(window.__TOOL_DATA__);
document.getElementById('status').textContent = String(window.pwned);
</script></body></html>"""

HOSTILE = {
    "a": "</script><script>window.pwned=1</script>",
    "b": "<!--",
    "c": "\u2028\u2029",
    "d": "&amp; <b>x</b>",
    "e": "<script>window.pwned=2</script><!--<script>",
    "</script><script>window.pwned=3</script>": ["]]>", "\u0000", "é文"],
}


def dump_dom(page_html: str, tmp_path: Path, *, virtual_time_ms: int | None = None,
             name: str = "page") -> tuple[str, str]:
    """(the DOM as Chromium serialises it after loading the page, its stderr). With
    ``virtual_time_ms``, timers and pending loads get that much (virtual) time to run first."""
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.skip("chromium is not installed: scripts/test installs it as root with apt-get (Debian package "
                    "'chromium')")
    page = tmp_path / f"{name}.html"
    page.write_text(page_html, "utf-8")
    profile = tmp_path / f"{name}-profile"
    profile.mkdir()
    budget = [f"--virtual-time-budget={virtual_time_ms}"] if virtual_time_ms else []
    proc = subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={profile}", *budget, "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout, proc.stderr


def probe(page_html: str, tmp_path: Path) -> tuple[Any, str]:
    """(window.__TOOL_DATA__, window.pwned as text) after Chromium ran a PROBE_PAGE-based page."""
    dom, stderr = dump_dom(page_html, tmp_path)
    out = re.search(r'<div id="out">(.*?)</div>', dom, re.DOTALL)
    # An element id would become a global of that name, hence "status" rather than "pwned".
    status = re.search(r'<div id="status">(.*?)</div>', dom, re.DOTALL)
    assert out and status, f"the page did not run its script:\n{dom}\n{stderr}"
    return json.loads(htmllib.unescape(out[1])), status[1]

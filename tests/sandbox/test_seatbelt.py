"""The macOS profile as text: what it allows per Confinement, and that no path can become SBPL.
(macOS itself is not here: these tests read the generated profile.)"""

from __future__ import annotations

import os
import re

import pytest

from sidecar.sandbox.policy import Confinement
from sidecar.sandbox.seatbelt import SANDBOX_EXEC, Profile, profile

WORKSPACE = "/Users/jane/Library/Application Support/covalt/chats/c1/workspace"
TOOLSET = "/Users/jane/Library/Application Support/covalt/toolsets/weather"


def _sexp_balanced(text: str) -> bool:
    """Parentheses balance outside strings and comments, and every string is closed."""
    depth, in_string, escaped = 0, False, False
    for line in text.splitlines():
        for char in line if in_string else line.split(";", 1)[0]:
            if in_string:
                if escaped:
                    escaped = False
                elif char == "\\":
                    escaped = True
                elif char == '"':
                    in_string = False
            elif char == '"':
                in_string = True
            elif char == "(":
                depth += 1
            elif char == ")":
                depth -= 1
                if depth < 0:
                    return False
    return depth == 0 and not in_string


def _rules(p: Profile, operation: str) -> list[str]:
    """The paths granted by the ``(allow <operation> ...)`` forms, through the parameters."""
    found: list[str] = []
    for block in re.findall(r"^\(allow " + re.escape(operation) + r"\n((?:  .*\n)+)", p.text, re.M):
        found += [p.params[key] for key in re.findall(r'\(param "([A-Z_0-9]+)"\)', block)]
    return found


def test_the_default_denies_everything_and_writes_only_the_workspace() -> None:
    p = profile(Confinement(), workspace=WORKSPACE, toolset=TOOLSET, read_only=("/opt/python",))
    assert p.text.startswith("(version 1)\n(deny default)\n")
    assert _sexp_balanced(p.text)
    assert _rules(p, "file-read* file-write*") == [WORKSPACE]
    readable = _rules(p, "file-read*")
    assert TOOLSET in readable and "/opt/python" in readable and "/usr" in readable
    assert not any(path.startswith("/Users/jane") and path != TOOLSET for path in readable)
    assert "network" not in p.text.replace("; sandbox.network: none", "")
    assert "(allow signal (target same-sandbox))" in p.text  # never the sidecar
    assert "(allow process-fork)" in p.text


def test_writable_extras_and_a_workspace_less_worker() -> None:
    p = profile(Confinement(writable=("/srv/out",)), workspace=None, toolset=TOOLSET)
    assert _rules(p, "file-read* file-write*") == ["/srv/out"]
    bare = profile(Confinement(), workspace=None, toolset=TOOLSET)
    assert "file-write*" not in bare.text


def test_network_follows_the_mode() -> None:
    full = profile(Confinement(network="full"), workspace=WORKSPACE)
    assert "(allow network*)" in full.text
    listed = profile(Confinement(network="allowedHosts", allowed_hosts=("api.example.com",)),
                     workspace=WORKSPACE, proxy_port=49152)
    assert '(allow network-outbound (remote ip "localhost:49152"))' in listed.text
    assert "(allow network*)" not in listed.text and "api.example.com" not in listed.text
    with pytest.raises(ValueError, match="port of the sidecar's proxy"):
        profile(Confinement(network="allowedHosts"), workspace=WORKSPACE)


def test_one_process_means_no_fork() -> None:
    assert "(allow process-fork)" not in profile(Confinement(max_processes=1), workspace=WORKSPACE).text


@pytest.mark.parametrize("hostile", [
    '/Users/jane/x")) (allow file-write* (subpath "/',
    "/Users/jane/a\\\") (allow default) ;",
    '/Users/jane/")\n(allow default)\n("',
    "/Users/jane/(allow default)",
])
def test_no_path_can_end_its_string_or_add_a_rule(hostile: str) -> None:
    try:
        p = profile(Confinement(writable=(hostile,)), workspace=hostile, toolset=hostile, read_only=(hostile,))
    except ValueError as exc:
        assert "control character" in str(exc)  # a line break is refused outright
        return
    assert hostile not in p.text and "/Users/jane" not in p.text  # paths travel as parameters only
    assert _sexp_balanced(p.text)
    assert "(allow default)" not in p.text
    assert set(_rules(p, "file-read* file-write*")) == {os.path.realpath(hostile)}
    argv = p.argv(["/usr/bin/python3", "-c", "pass"])
    assert argv[:3] == [SANDBOX_EXEC, "-p", p.text]
    assert f"WRITE_0={os.path.realpath(hostile)}" in argv  # one argv element: sandbox-exec never parses it as SBPL


@pytest.mark.parametrize("bad", ["relative/path", "/tmp/a\x00b", "/tmp/tab\there", "/tmp/del\x7f"])
def test_paths_that_are_relative_or_hold_control_characters_are_refused(bad: str) -> None:
    with pytest.raises(ValueError):
        profile(Confinement(), workspace=bad)


def test_paths_are_made_canonical() -> None:
    p = profile(Confinement(), workspace="/tmp/../tmp/./ws")
    assert _rules(p, "file-read* file-write*") == [os.path.realpath("/tmp/ws")]


def test_argv_wants_an_absolute_program() -> None:
    p = profile(Confinement(), workspace=WORKSPACE)
    with pytest.raises(ValueError, match="absolute path"):
        p.argv(["python3", "-c", "pass"])
    with pytest.raises(ValueError):
        p.argv(["-p"])

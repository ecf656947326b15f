"""Golden transcripts: JSONL files of what a client sends and what it must receive.

Each line is one step:
    {"send": {...}}         send this message
    {"sendRaw": "text"}     send this line verbatim (for broken input)
    {"recv": {...}}         the next message from the sidecar must match this
    {"exit": 0}             the process must exit with this code
    {"comment": "..."}      ignored
In expected values the strings "<any>", "<string>", "<int>" and "<number>" match any value, any
string, any integer and any number, so pids, versions and timings don't pin a transcript.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .client import SidecarClient

WILDCARDS = {
    "<any>": lambda v: True,
    "<string>": lambda v: isinstance(v, str),
    "<int>": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "<number>": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
}


class Mismatch(AssertionError):
    pass


def mismatches(expected: Any, actual: Any, path: str = "$") -> list[str]:
    if isinstance(expected, str) and expected in WILDCARDS:
        return [] if WILDCARDS[expected](actual) else [f"{path}: {actual!r} is not {expected}"]
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return [f"{path}: expected an object, got {actual!r}"]
        out = []
        for key in [*expected, *(k for k in actual if k not in expected)]:
            if key not in actual:
                out.append(f"{path}.{key}: missing")
            elif key not in expected:
                out.append(f"{path}.{key}: unexpected {actual[key]!r}")
            else:
                out += mismatches(expected[key], actual[key], f"{path}.{key}")
        return out
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            return [f"{path}: expected {expected!r}, got {actual!r}"]
        pairs = enumerate(zip(expected, actual, strict=True))
        return [m for i, (e, a) in pairs for m in mismatches(e, a, f"{path}[{i}]")]
    if type(expected) is not type(actual) or expected != actual:
        return [f"{path}: expected {expected!r}, got {actual!r}"]
    return []


def load(path: Path) -> list[dict[str, Any]]:
    steps = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if line.strip():
            try:
                steps.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{number}: not JSON: {exc}") from None
    return steps


async def replay(path: Path, data_dir: Path, *, echo: bool = False, timeout: float = 10) -> None:  # noqa: ASYNC109 (a deadline per step)
    """Play ``path`` against a fresh sidecar; raise ``Mismatch`` at the first difference."""
    received: list[dict[str, Any]] = []
    async with SidecarClient.spawn(data_dir, initialize=False) as client:
        client.on_message = received.append
        for number, step in enumerate(load(path), start=1):
            where = f"{path.name} step {number}"
            if "send" in step:
                if echo:
                    print(">>", json.dumps(step["send"]))
                await client.send(step["send"])
            elif "sendRaw" in step:
                if echo:
                    print(">>", step["sendRaw"])
                await client.send_raw(step["sendRaw"].encode())
            elif "recv" in step:
                message = await _next(client, received, timeout)
                if echo:
                    print("<<", json.dumps(message))
                problems = mismatches(step["recv"], message)
                if problems:
                    raise Mismatch(f"{where}: {json.dumps(message)}\n  " + "\n  ".join(problems))
            elif "exit" in step:
                code = await client.wait_exit(timeout)
                if code != step["exit"]:
                    raise Mismatch(f"{where}: exit code {code}, expected {step['exit']}")
            elif "comment" not in step:
                raise ValueError(f"{where}: unknown step {step!r}")


async def _next(client: SidecarClient, received: list[dict[str, Any]], timeout: float) -> dict[str, Any]:  # noqa: ASYNC109 (a deadline per step)
    await client.wait_for(lambda: received, timeout)
    return received.pop(0)

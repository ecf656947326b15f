"""Replay golden transcripts (see sidecar/transcripts.py for the format)."""

from __future__ import annotations

import argparse
import sys
import tempfile
from functools import partial
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sidecar.transcripts import Mismatch, replay  # noqa: E402 (after the sys.path set-up above)


def main() -> int:
    parser = argparse.ArgumentParser(description="Replay JSONL transcripts against the sidecar.")
    parser.add_argument("files", nargs="*", type=Path)
    parser.add_argument("-v", "--verbose", action="store_true", help="print the traffic")
    args = parser.parse_args()
    files = args.files or sorted((ROOT / "protocol" / "examples").glob("*.jsonl"))
    failed = 0
    for path in files:
        with tempfile.TemporaryDirectory() as tmp:
            try:
                anyio.run(partial(replay, path, Path(tmp) / "data", echo=args.verbose))
            except (Mismatch, ValueError, TimeoutError) as exc:
                failed += 1
                print(f"FAIL {path}: {exc}")
            else:
                print(f"ok   {path}")
    print(f"{len(files) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())

"""A failure pytest cannot format is still reported FAILED by name, and the run goes on
(tests/report_fallback.py). Each test runs an inner session in its own process, with the plugin
loaded as the suite loads it, and reads its summary."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

# Task groups inside task groups, each wrapping the error below it in one more ExceptionGroup:
# deeper than pytest's recursive filtering of a group's traceback can follow.
DEEP_GROUP = """
import anyio
import pytest


@pytest.fixture
def anyio_backend():
    return "asyncio"


async def nest(depth):
    async with anyio.create_task_group() as tg:
        if depth:
            tg.start_soon(nest, depth - 1)
        else:
            raise ValueError("the innermost task failed")


@pytest.mark.anyio
async def test_deep_group():
    await nest(1000)


def test_after():
    pass
"""

# CPython before 3.11.8 (python/cpython#106905): an ast.parse started while another is building
# its tree makes the first raise SystemError. A garbage cycle whose finalizer parses, with the
# collector run every few allocations, starts one inside each parse pytest's formatter makes.
FORMATTER_FAILS = """
import ast
import gc

import pytest


class Reparse:
    armed = True

    def __del__(self):
        if Reparse.armed:
            ast.parse("x = 1")
            cycle()


def cycle():
    garbage = Reparse()
    garbage.me = garbage


@pytest.fixture
def collector_parses():
    threshold = gc.get_threshold()
    gc.set_threshold(20)
    cycle()
    yield
    Reparse.armed = False
    gc.set_threshold(*threshold)


def test_unformattable(collector_parses):
    assert 1 == 2


def test_after():
    pass
"""


def run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, source: str, *args: str) -> pytest.RunResult:
    pytester.makepyfile(test_inner=source)
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    return pytester.runpytest_subprocess("-p", "tests.report_fallback", "-p", "no:cacheprovider", "-rfE", *args)


def reported(result: pytest.RunResult, failed: str) -> None:
    text = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in text, text
    assert result.ret == pytest.ExitCode.TESTS_FAILED, text
    result.assert_outcomes(failed=1, passed=1)
    assert f"FAILED test_inner.py::{failed}" in text, text


def test_a_deep_exception_group_is_reported_and_the_worker_goes_on(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = run(pytester, monkeypatch, DEEP_GROUP, "-n", "1")
    reported(result, "test_deep_group")
    text = result.stdout.str()
    assert "pytest could not format this failure (RecursionError" in text, text
    # The plain traceback shows the groups to a readable depth, then what failed at their bottom.
    assert "ExceptionGroup: unhandled errors in a TaskGroup (1 sub-exception)" in text, text
    assert "groups nested deeper than 10; the exceptions at their bottom:" in text, text
    assert "ValueError: the innermost task failed" in text, text


def test_a_parse_in_a_finalizer_does_not_break_the_report(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = run(pytester, monkeypatch, FORMATTER_FAILS)
    reported(result, "test_unformattable")
    # pytest's own report: with the collector off while it formats, no finalizer parses inside its
    # parses (without the plugin, CPython 3.11.7 raises SystemError here and the session ends).
    text = result.stdout.str()
    assert "E       assert 1 == 2" in text, text
    assert "could not format" not in text, text

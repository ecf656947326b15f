"""A failing test is reported by name even when pytest cannot format its failure.

pytest builds a failure's text inside ``pytest_runtest_makereport``; if that raises, the exception
leaves the hook as an INTERNALERROR, the session (or, under xdist, the worker and with it the
session) ends, and the summary names no failed test. Two ways we have seen it happen:

- ExceptionGroups nested a few hundred deep (anyio task groups inside task groups): pytest filters
  a group's traceback by recursing through every sub-exception and hits RecursionError.
- CPython 3.11.0-3.11.7 kept ``ast.parse``'s recursion counter in one per-interpreter struct
  (python/cpython#106905, fixed in 3.11.8 and 3.12.1): an ``ast.parse`` that starts while another is
  building its tree (a finalizer run by the garbage collector during the build, or another thread)
  makes the first one raise ``SystemError: AST constructor recursion depth mismatch``. pytest parses
  every traceback entry's whole source file (getstatementrange_ast) and 3.11's traceback module
  parses each line it underlines, so the big trees of a long async traceback give it the most room.

The wrapper below keeps the garbage collector off while pytest formats, which closes the second,
and catches whatever the formatter still raises and returns the same report pytest would
have made, FAILED, with a plain traceback that this module writes itself: frames and source lines
only, no AST, no recursion deeper than a bounded group depth, so it cannot fail the same way.
"""

from __future__ import annotations

import gc
import linecache
from collections.abc import Generator
from types import TracebackType

import pytest

# Bounds for the plain traceback, as the traceback module has for groups: deep enough to read the
# failure, small enough that the report stays readable and its writing cannot recurse far.
MAX_GROUP_DEPTH = 10
MAX_GROUP_WIDTH = 15
MAX_CHAIN = 8
MAX_FRAMES = 40
MAX_LEAVES = 1000


@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    # The innermost wrapper: it wraps pytest's own report-making, and the outer wrappers (xfail
    # handling in skipping.py) still see the report this returns. The collector is off meanwhile:
    # without a collection no finalizer (asyncio's "exception was never retrieved" logs a traceback,
    # which parses) runs in the middle of a parse and no other thread gets the GIL there, so on
    # CPython < 3.11.8 pytest's parses cannot meet another one (#106905).
    collecting = gc.isenabled()
    gc.disable()
    try:
        return (yield)
    except Exception as failure:
        return fallback_report(item, call, failure)
    finally:
        if collecting:
            gc.enable()


def fallback_report(item: pytest.Item, call: pytest.CallInfo[None], failure: BaseException) -> pytest.TestReport:
    assert call.when != "collect"  # (a test's phases only: collection has its own report)
    failed = failure if call.excinfo is None else call.excinfo.value
    head = f"pytest could not format this failure ({describe(failure)}); a plain traceback follows."
    text = "\n".join([head, *plain_traceback(failed, start=str(item.path))])
    # Captured output (the sidecar's stderr) is kept, as pytest's own report keeps it.
    sections = [(f"Captured {key} {when}", content) for when, key, content in getattr(item, "_report_sections", ())]
    return pytest.TestReport(
        nodeid=item.nodeid,
        location=item.location,
        keywords=dict.fromkeys(item.keywords, 1),
        outcome="failed",
        longrepr=text,
        when=call.when,
        sections=sections,
        duration=call.duration,
        start=call.start,
        stop=call.stop,
        user_properties=item.user_properties,
    )


def describe(exc: BaseException) -> str:
    kind = type(exc)
    name = kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"
    try:
        message = str(exc)
    except Exception:
        message = "<str() of the exception failed>"
    return f"{name}: {message}" if message else name


def plain_traceback(exc: BaseException, depth: int = 0, start: str | None = None) -> list[str]:
    """Lines like the traceback module's: the chain oldest first, a group's members indented below
    it. ``start``: the test's file; frames above its first one (pytest's own) are left out."""
    chain: list[tuple[BaseException, str | None]] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    joint: str | None = None
    while current is not None and id(current) not in seen and len(chain) < MAX_CHAIN:
        seen.add(id(current))
        chain.append((current, joint))
        if current.__cause__ is not None:
            current, joint = current.__cause__, "The above exception was the direct cause of the following exception:"
        elif current.__context__ is not None and not current.__suppress_context__:
            current, joint = current.__context__, "During handling of the above exception, another exception occurred:"
        else:
            current = None
    lines: list[str] = []
    for older, joint in reversed(chain):
        lines += _one(older, depth, start)
        if joint is not None:
            lines += ["", joint, ""]
    return lines


def _one(exc: BaseException, depth: int, start: str | None) -> list[str]:
    lines = [*_frames(exc.__traceback__, start), describe(exc)]
    lines += [str(note) for note in getattr(exc, "__notes__", None) or ()]
    if not isinstance(exc, BaseExceptionGroup) or depth > MAX_GROUP_DEPTH + 2:
        return lines  # (the second test: a group in the chain of a leaf below the deepest shown)
    if depth < MAX_GROUP_DEPTH:
        members = list(exc.exceptions)
    else:
        # What failed is at the bottom: past the depth shown, the groups' leaves stand in for them.
        members = _leaves(exc)
        lines.append(f"  ... groups nested deeper than {MAX_GROUP_DEPTH}; the exceptions at their bottom:")
    for i, member in enumerate(members[:MAX_GROUP_WIDTH], 1):
        lines.append(f"+---------------- {i} of {len(members)} ----------------")
        lines += ["| " + line for line in plain_traceback(member, depth + 1)]
    if len(members) > MAX_GROUP_WIDTH:
        lines.append(f"+---------------- and {len(members) - MAX_GROUP_WIDTH} more ----------------")
    return lines


def _leaves(group: BaseExceptionGroup[BaseException]) -> list[BaseException]:
    leaves: list[BaseException] = []
    stack: list[BaseException] = [group]
    while stack and len(leaves) < MAX_LEAVES:
        exc = stack.pop()
        if isinstance(exc, BaseExceptionGroup):
            stack += reversed(exc.exceptions)
        else:
            leaves.append(exc)
    return leaves


def _frames(tb: TracebackType | None, start: str | None) -> list[str]:
    frames: list[list[str]] = []
    while start is not None and tb is not None and _reaches(tb, start) and tb.tb_frame.f_code.co_filename != start:
        tb = tb.tb_next
    while tb is not None:
        code = tb.tb_frame.f_code
        frame = [f'  File "{code.co_filename}", line {tb.tb_lineno}, in {code.co_name}']
        source = linecache.getline(code.co_filename, tb.tb_lineno or 0).strip()
        frames.append([*frame, f"    {source}"] if source else frame)
        tb = tb.tb_next
    if not frames:
        return []
    if len(frames) > 2 * MAX_FRAMES:
        frames = [*frames[:MAX_FRAMES], [f"  ... {len(frames) - 2 * MAX_FRAMES} frames ..."], *frames[-MAX_FRAMES:]]
    return ["Traceback (most recent call last):", *(line for frame in frames for line in frame)]


def _reaches(tb: TracebackType | None, filename: str) -> bool:
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == filename:
            return True
        tb = tb.tb_next
    return False

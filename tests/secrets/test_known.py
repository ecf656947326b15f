"""secrets/known.py and the log filter: a value the sidecar knows is secret never reaches a log line,
whichever logger (ours, httpx, an SDK's) writes it, at any level, in the message, its args or a traceback."""

from __future__ import annotations

import io
import logging
import threading
from collections.abc import Iterator

import pytest

from sidecar import logs
from sidecar.secrets import known
from sidecar.secrets.variables import resolve


@pytest.fixture(autouse=True)
def clean_registry() -> Iterator[None]:
    known.clear()
    yield
    known.clear()


def test_scrub_known_masks_every_remembered_value_and_its_stripped_form() -> None:
    known.remember("sk-pasted-key-7f3a\n")
    known.remember("tok-B-91c2e")
    known.remember("abc")  # too short to tell from a word: ignored
    text = "key sk-pasted-key-7f3a\n and tok-B-91c2e and abc"
    assert known.scrub_known(text) == "key **** and **** and abc"  # the pasted form goes whole
    known.forget("tok-B-91c2e")
    assert "tok-B-91c2e" in known.scrub_known(text)


def test_remember_from_many_threads_loses_nothing() -> None:
    values = [f"value-{i:04d}-secret" for i in range(400)]
    threads = [threading.Thread(target=known.remember_all, args=(values[i::8],)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert set(known.known()) == set(values)


def test_resolving_a_reference_remembers_a_secret_but_not_a_harmless_value() -> None:
    env = {"GITHUB_TOKEN": "ghp-env-value-123", "LOG_LEVEL": "debug", "THING": "q9Zr4LmX02pK7tYvW3bN"}
    resolve("${GITHUB_TOKEN} ${LOG_LEVEL} ${THING}", env)
    assert set(known.known()) == {"ghp-env-value-123", "q9Zr4LmX02pK7tYvW3bN"}


@pytest.fixture
def captured() -> Iterator[io.StringIO]:
    """The sidecar's real logging setup at debug level, its stderr handler pointed at a buffer."""
    out = io.StringIO()
    listener = logs.setup("debug")
    stream = listener.handlers[0]
    assert isinstance(stream, logging.StreamHandler)
    stream.setStream(out)  # type: ignore[arg-type] - StringIO is the text stream the handler writes
    try:
        yield out
    finally:
        listener.stop()
        logging.getLogger().handlers[:] = []
        logging.raiseExceptions = True


def test_every_logger_at_every_level_is_scrubbed(captured: io.StringIO) -> None:
    known.remember("sk-known-A-5d1e")
    for name in ("sidecar", "httpx2", "httpcore2.http11", "mcp.client", "openai", "anthropic", "urllib3"):
        lg = logging.getLogger(name)
        lg.debug("debug %s", "sk-known-A-5d1e")
        lg.info("HTTP Request: GET http://user:pw-basic-C-77@h/x?token=tok-D-4410 %s", "ok")
        lg.warning("header %r", {"Authorization": "Bearer sk-known-A-5d1e"})
    try:
        raise RuntimeError("Illegal header value b'Bearer sk-known-A-5d1e\\n'")
    except RuntimeError:
        logging.getLogger("openai").exception("request failed")
    logging.getLogger("sidecar").info("stack", stack_info=True, extra={"x": 1})
    logging.getLogger().handlers[0].flush()
    for h in logging.getLogger().handlers:
        h.flush()
    text = _drain(captured)
    assert "debug" in text and "request failed" in text and "Illegal header value" in text
    for value in ("sk-known-A-5d1e", "pw-basic-C-77", "tok-D-4410"):
        assert value not in text, value


def test_httpx_is_capped_at_warning_unless_debug_is_asked_for() -> None:
    listener = logs.setup("info")
    try:
        for name in ("httpx", "httpcore", "httpx2", "httpcore2.http11"):
            assert logging.getLogger(name).getEffectiveLevel() == logging.WARNING, name
        assert logging.getLogger("openai").getEffectiveLevel() == logging.INFO
    finally:
        listener.stop()
        logging.getLogger().handlers[:] = []
        logging.raiseExceptions = True
        for name in logs.HTTP_LOGGERS:
            logging.getLogger(name).setLevel(logging.NOTSET)


def _drain(out: io.StringIO) -> str:
    import time

    for _ in range(200):  # the queue listener writes from its own thread
        if "request failed" in out.getvalue() and "stack" in out.getvalue():
            break
        time.sleep(0.01)
    return out.getvalue()


def test_a_log_call_with_a_bad_format_string_prints_nothing_raw(captured: io.StringIO,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    logging.getLogger("some.library").warning("token %d", "sk-bad-format-9z8y")  # %d of a str: a logging error
    logging.getLogger("sidecar").warning("stack done")
    text = _drain_until(captured, "stack done") + "".join(capsys.readouterr())
    assert "sk-bad-format-9z8y" not in text


def _drain_until(out: io.StringIO, marker: str) -> str:
    import time

    for _ in range(200):
        if marker in out.getvalue():
            break
        time.sleep(0.01)
    return out.getvalue()

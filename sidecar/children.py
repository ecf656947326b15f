"""Child processes: how the sidecar starts them, hears their stderr, stops them and words their end.

Every child (a toolset worker, a stdio MCP server, a ``run_command`` shell) starts in a session of
its own, so its pid is also its process group id and stopping the group stops whatever it started.
On Linux it also gets a parent-death signal (SIGKILL, through util-linux's ``setpriv``, which keeps
the spawn as cheap as a plain one), so a sidecar that dies without cleaning up (``kill -9``, a crash)
takes its children along; elsewhere, or without ``setpriv``, a child learns of it from its stdin
reaching EOF. The signal is tied to the thread that spawned the child: on Linux that is the
spawner thread (sidecar/spawner.py), which lives as long as the sidecar and keeps the fork, which
waits for the child to reach exec, off the event loop.

    child = await spawn(argv, env=env, cwd=folder, label="toolset app-builder")
    await child.stdin.send(b"...")                 # stdin and stdout are pipes unless told otherwise
    child.stderr.text()                            # the last lines the child wrote to stderr
    await child.stop(stdin_grace=0.5, term_grace=0.5)  # close stdin -> SIGTERM group -> SIGKILL group
    exit_reason(child.returncode)                  # "exited with code 3", "was killed by SIGSEGV (...)"

Tool code gets ``scrubbed_env()``: an allow-list (``secrets/inherited.py`` holds it, with this
machine's certificate and proxy settings), so the sidecar's own secrets (provider API keys, tokens the
desktop app passed in) never reach a tool, a worker, an MCP server or a shell command.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import suppress
from functools import cache
from typing import IO, Any, Literal, Protocol

import anyio
import anyio.abc
import anyio.to_thread

from . import spawner
from .secrets import clean
from .secrets.inherited import inherited

log = logging.getLogger("sidecar.children")

PIPE = subprocess.PIPE
DEVNULL = subprocess.DEVNULL
STDOUT = subprocess.STDOUT
TAIL: Literal["tail"] = "tail"  # stderr goes to a pipe read into a StderrTail

SIGKILL: int = getattr(signal, "SIGKILL", 9)  # Windows has no SIGKILL; there it means process.kill()
KILL_WAIT = 5.0  # a process in uninterruptible sleep may outlive SIGKILL for a while
STDIN_FLUSH = 0.5  # closing stdin waits for buffered bytes that a child that never reads never takes
_POLL = 0.01  # seconds between probes of a process group, which has no exit event

def scrubbed_env(extra: Mapping[str, str] | None = None, *, network: bool = True, package_runners: bool = False,
                 passthrough: Iterable[str] = ()) -> dict[str, str]:
    """The environment a child gets: the allow-list of ``secrets/inherited.py`` (the basics; with
    ``network`` this machine's certificate and proxy settings; with ``package_runners`` the package
    managers' settings; ``passthrough``: a server's envPassthrough names), then ``extra`` over it."""
    env = inherited(network=network, package_runners=package_runners, names=passthrough)
    env.setdefault("PATH", os.defpath)
    env["PYTHONIOENCODING"] = "utf-8"
    if extra:
        env.update(extra)
    return env


_SIGNAL_HINTS = {
    "SIGSEGV": " (a crash in native code)",
    "SIGBUS": " (a crash in native code)",
    "SIGABRT": " (native code aborted)",
    "SIGKILL": " (perhaps by the system, for using too much memory)",
}


def exit_reason(code: int | None) -> str:
    """How a child ended, worded to follow "the server" / "its worker, which"."""
    if code is None:
        return "is still running"
    if code >= 0:
        return f"exited with code {code}"
    name = signal_name(-code)
    return f"was killed by {name}{_SIGNAL_HINTS.get(name, '')}"


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


class Job(Protocol):
    """A Windows Job Object holding a child and all it starts (``sandbox/windows.py`` makes them;
    the sandbox sits above this module, so the child sees only this much of one)."""

    def terminate(self) -> None: ...
    def active(self) -> bool: ...
    def close(self) -> None: ...


class StderrTail:
    """Drains a child's stderr on a thread until EOF, so a chatty child never blocks on a full
    pipe and the event loop never handles its output: keeps the last lines for error messages
    and logs each one at debug level."""

    def __init__(self, fd: int, label: str, *, lines: int = 20, line_chars: int = 2000,
                 logger: logging.Logger = log) -> None:
        self._label = label
        self._line_chars = line_chars
        self._log = logger
        self.lines: deque[str] = deque(maxlen=lines)
        self.count = 0
        """Lines read so far (the ring keeps the last few)."""
        self.on_line: Callable[[], None] | None = None
        """Called on the reading thread after each line (a package runner's install progress): it
        must only hand off, never block or do the work."""
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._pump, args=(fd,), name=f"stderr-{label}", daemon=True)
        self._thread.start()

    def text(self, lines: int | None = None, max_chars: int | None = None) -> str:
        """The last lines, for an error message: a child prints what it was given (a usage line with
        its ``--token``, an env dump), so secrets are masked (the debug log is scrubbed by its filter)."""
        kept = list(self.lines)
        text = clean("\n".join(kept if lines is None else kept[-lines:]))
        return text if max_chars is None else text[-max_chars:]

    async def settle(self, within: float) -> bool:
        """Wait up to ``within`` seconds until everything the child wrote has been read; whether it was."""
        if not self._done.is_set():
            # The pump thread sets a threading.Event: wait for it on a worker thread, let go on cancel.
            await anyio.to_thread.run_sync(self._done.wait, within, abandon_on_cancel=True)
        return self._done.is_set()

    def _pump(self, fd: int) -> None:
        partial = b""
        try:
            while chunk := os.read(fd, 1 << 16):
                *lines, partial = (partial + chunk).split(b"\n")
                if len(partial) > self._line_chars:  # a line without end must not grow forever
                    lines.append(partial)
                    partial = b""
                for line in lines:
                    self._add(line)
            if partial:
                self._add(partial)
        except OSError:
            pass
        finally:
            os.close(fd)
            self._done.set()

    def _add(self, raw: bytes) -> None:
        line = raw[: self._line_chars].decode("utf-8", "replace").rstrip("\r")
        if len(raw) > self._line_chars:
            line += "…"
        self.lines.append(line)
        self.count += 1
        self._log.debug("%s: %s", self._label, line)
        if self.on_line is not None:
            self.on_line()


class Child:
    """A started child process and its process group."""

    def __init__(self, process: anyio.abc.Process, label: str, stderr: StderrTail | None) -> None:
        self.process = process
        self.pid = process.pid
        self.label = label
        self.stderr = stderr
        self._stopped = False
        self._sandbox_info: int | None = None  # bwrap's --info-fd pipe (sidecar/sandbox/runner.py)
        self._sandbox_pid: int | None = None
        self._sandboxed = False
        self._job: Job | None = None  # Windows: the Job Object holding the child and all it starts
        self._on_stop: list[Callable[[], None]] = []

    def contain(self, job: Job) -> None:
        """Stop the child through ``job`` (Windows has no process groups: a job is its group), and
        close the job when the child is stopped, which ends whatever is still in it."""
        self._job = job
        self.on_stop(job.close)

    def on_stop(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` once the child is stopped (what lived only for it: a sandbox's proxy)."""
        self._on_stop.append(callback)

    def sandbox_info(self, fd: int) -> None:
        """Keep the read end of bubblewrap's ``--info-fd`` pipe: it names the sandbox's pid 1."""
        self._sandbox_info = fd
        self._sandboxed = True

    def interrupt(self) -> None:
        """SIGINT for the program's process group, as a terminal's Ctrl-C: the program and what it
        started can unwind, each getting it once (a program does not pass it on to its group).
        In a bubblewrap sandbox our child is bwrap, which SIGINT would kill outright: the signal
        goes to the sandbox's own group instead (its pid 1 has no handler, so the kernel drops it
        there). Elsewhere the child leads its own group (a new session)."""
        target = self._confined_group()
        with suppress(ProcessLookupError, PermissionError):
            if target is not None:
                os.killpg(target, signal.SIGINT)
            elif sys.platform == "win32":
                os.kill(self.pid, signal.SIGINT)
            else:
                os.killpg(self.pid, signal.SIGINT)

    def _confined_group(self) -> int | None:
        if self._sandbox_pid is None and self._sandbox_info is not None:
            with suppress(OSError, ValueError, TypeError):
                self._sandbox_pid = int(json.loads(os.read(self._sandbox_info, 1 << 16))["child-pid"])
        return self._sandbox_pid

    @property
    def stdin(self) -> anyio.abc.ByteSendStream:
        assert self.process.stdin is not None, "spawned without a stdin pipe"
        return self.process.stdin

    @property
    def stdout(self) -> anyio.abc.ByteReceiveStream:
        assert self.process.stdout is not None, "spawned without a stdout pipe"
        return self.process.stdout

    @property
    def returncode(self) -> int | None:
        code = self.process.returncode
        if self._sandboxed and code is not None and 128 < code < 128 + 65:
            # bwrap reports a program killed by a signal as 128 + the signal, the way a shell does
            return 128 - code
        return code

    @property
    def alive(self) -> bool:
        return self.process.returncode is None

    @property
    def stopped(self) -> bool:
        """``stop`` was called (the child may still be on its way out)."""
        return self._stopped

    def stderr_text(self, lines: int | None = None, max_chars: int | None = None) -> str:
        return self.stderr.text(lines, max_chars) if self.stderr is not None else ""

    async def wait_exit(self, within: float) -> bool:
        """Wait up to ``within`` seconds for the leader to exit; whether it did. anyio's ``wait()`` waits
        for the exit only (not for the pipes a surviving grandchild may hold)."""
        with anyio.move_on_after(within):
            await self.process.wait()
        return self.process.returncode is not None

    def signal_group(self, sig: int) -> bool:
        """Send ``sig`` to the child's process group; False once nothing is left in it."""
        if self._job is not None:
            # A job has no gentle stop: SIGTERM and SIGKILL both end every process in it at once.
            try:
                self._job.terminate()
            except OSError as exc:
                log.warning("%s: cannot terminate its job: %s", self.label, exc)
            return self.group_alive()
        if sys.platform == "win32":  # no process groups: the leader is all we can reach
            with suppress(ProcessLookupError, OSError):
                self.process.kill() if sig == SIGKILL else self.process.terminate()
            return self.alive
        try:
            os.killpg(self.pid, sig)  # a new session: the leader's pid is the group id
        except ProcessLookupError:
            return False
        except PermissionError:
            log.warning("%s: no permission to signal process group %d", self.label, self.pid)
        return True

    def group_alive(self) -> bool:
        _ = self.process.returncode  # lets the leader be reaped
        if self._job is not None:
            try:
                return self._job.active()
            except OSError:
                return self.alive
        if sys.platform == "win32":
            return self.alive
        try:
            os.killpg(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    def kill(self) -> None:
        """SIGKILL the whole group now; the process is reaped when ``stop`` runs."""
        self.signal_group(SIGKILL)

    async def stop(self, *, stdin_grace: float, term_grace: float, kill_wait: float = KILL_WAIT) -> None:
        """The stop ladder: close stdin and give the child ``stdin_grace`` to leave by itself, then
        SIGTERM its group and wait ``term_grace`` for the group to empty, then SIGKILL the group.
        The group is swept even after the leader exited, so grandchildren don't outlive it. A zero
        grace skips its step. Idempotent; always runs to the end, even when cancelled."""
        if self._stopped:
            return
        self._stopped = True
        with anyio.CancelScope(shield=True):
            process = self.process
            if process.stdin is not None:
                with anyio.move_on_after(STDIN_FLUSH), \
                        suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                    await process.stdin.aclose()
                if stdin_grace > 0:
                    await self.wait_exit(stdin_grace)
            if term_grace > 0 and self.group_alive():
                log.debug("%s: SIGTERM to process group %d", self.label, self.pid)
                if self.signal_group(signal.SIGTERM):
                    await self._until_group_gone(term_grace)
            if self.group_alive():
                self.signal_group(SIGKILL)
            await self.wait_exit(kill_wait)
            await self._close_pipes()
            if self._sandbox_info is not None:
                os.close(self._sandbox_info)
                self._sandbox_info = None
            for callback in self._on_stop:
                callback()
            self._on_stop.clear()
        log.debug("%s: pid %d stopped (%s)", self.label, self.pid, exit_reason(self.returncode))

    async def _until_group_gone(self, within: float) -> None:
        with anyio.move_on_after(within):
            await self.process.wait()
            # The rest of the group are not our children: no exit event or waitpid reaches them
            # (a pidfd would need each pid, racing their exits), so probing the group is all there is.
            while self.group_alive():  # noqa: ASYNC110 (no event: see above)
                await anyio.sleep(_POLL)

    async def _close_pipes(self) -> None:
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            if stream is not None:
                with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                    await stream.aclose()
        # asyncio keeps the subprocess transport open until wait() returns, which a grandchild
        # holding a pipe could delay forever; close it ourselves so nothing is left unclosed.
        transport = getattr(getattr(self.process, "_process", None), "_transport", None)
        close = getattr(transport, "close", None)
        if callable(close):
            with suppress(Exception):
                close()


async def spawn(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    label: str,
    cwd: str | os.PathLike[str] | None = None,
    stdin: int | IO[Any] | None = PIPE,
    stdout: int | IO[Any] | None = PIPE,
    stderr: int | IO[Any] | Literal["tail"] | None = TAIL,
    stderr_lines: int = 20,
    stderr_line_chars: int = 2000,
    logger: logging.Logger = log,
    pass_fds: Sequence[int] = (),
    creationflags: int = 0,
) -> Child:
    """Start ``argv`` in a new session, tied to the sidecar's life where the OS allows.

    Raises:
        OSError: the child could not be started (no such command, bad cwd, not executable, ...).
    """
    command = list(argv)
    wrapper = _pdeathsig_wrapper()
    if wrapper:
        # setpriv would only report a failed exec on its stderr: fail here as Popen would.
        _check_executable(command[0], env, cwd)
        command = [*wrapper, *command]
    tail_read = tail_write = -1
    if stderr == TAIL:
        tail_read, tail_write = os.pipe()
    process: anyio.abc.Process | None = None
    tail: StderrTail | None = None

    def start_tail() -> StderrTail | None:
        # Starting a thread waits until it runs: on the spawner thread, not the event loop's.
        if tail_read < 0:
            return None
        return StderrTail(tail_read, label, lines=stderr_lines, line_chars=stderr_line_chars, logger=logger)

    try:
        with anyio.CancelScope(shield=True):  # a process started must also be tracked
            if sys.platform == "linux":  # forked off the event loop (sidecar/spawner.py says why)
                process, tail = await spawner.start(
                    command, stdin=stdin, stdout=stdout, stderr=tail_write if stderr == TAIL else stderr,
                    cwd=cwd, env=env, pass_fds=pass_fds, then=start_tail)
            else:
                process = await anyio.open_process(
                    command, stdin=stdin, stdout=stdout, stderr=tail_write if stderr == TAIL else stderr,
                    cwd=cwd, env=env, start_new_session=True, pass_fds=pass_fds, creationflags=creationflags,
                )
                tail = start_tail()
    except BaseException:
        if tail_read >= 0 and tail is None:
            os.close(tail_read)
        raise
    finally:
        if tail_write >= 0:
            os.close(tail_write)
    assert process is not None  # a shielded await either returns or raises
    logger.debug("%s: started pid %d", label, process.pid)
    return Child(process, label, tail)


def dies_with_sidecar() -> bool:
    """Whether ``spawn`` arms the parent-death signal before the child's program starts."""
    return bool(_pdeathsig_wrapper())


@cache
def _pdeathsig_wrapper() -> tuple[str, ...]:
    if sys.platform != "linux":
        return ()
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        log.info("no setpriv on PATH: children outlive a sidecar killed without warning until "
                 "their stdin reaches EOF")
        return ()
    return (setpriv, "--pdeathsig", "KILL", "--")


def _check_executable(program: str, env: Mapping[str, str], cwd: str | os.PathLike[str] | None) -> None:
    if os.sep in program:
        path = os.path.join(cwd, program) if cwd is not None else program
        if not os.path.exists(path):
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), program)
        if os.path.isdir(path) or not os.access(path, os.X_OK):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), program)
        return
    if shutil.which(program, path=env.get("PATH", os.defpath)) is None:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), program)

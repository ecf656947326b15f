"""The first program of a sandbox whose network is an allow-list: ``python -I -S bridge.py SOCKET PORT -- ARGV``.

The sandbox has a network namespace of its own with only loopback, so the tool cannot reach any
host by itself. The bridge listens on 127.0.0.1:PORT inside that namespace and carries each
connection, byte for byte, to SOCKET: the Unix socket of the sidecar's filtering proxy
(sidecar/sandbox/egress.py), bound into the sandbox. It then runs ARGV as its child with the proxy
variables pointing at 127.0.0.1:PORT (the sidecar puts them in the environment), waits for it and
exits as it did.

The bridge holds no authority: everything it can reach, the tool can reach by connecting to SOCKET
itself, and every decision (which host, which address) is taken by the proxy in the sidecar. So a
tool that hijacks it (ptrace, where the kernel allows tracing one's parent) or kills it gains
nothing: the bridge is the sandbox's first process, so when it dies the sandbox's init ends and the
kernel kills every process of the sandbox, the tool included. It listens before ARGV starts, so the
tool never finds the port free to put a listener of its own there.

An interrupt is not the bridge's to pass on: the sidecar stops a call with SIGINT to the sandbox's
whole process group (bwrap's ``--new-session`` group: the bridge, the tool and everything the tool
started), so the tool has it already. The bridge ignores SIGINT from its first line: forwarding it
gave the tool a second one, and a second SIGINT raises KeyboardInterrupt again inside the ``finally``
the first one started, so a tool lost the grace it gets to unwind. The bridge ends when the tool ends.

It is one thread: an epoll set carries every connection, with at most 64 KiB waiting in each
direction (a direction is not read while its bytes wait, so a slow reader slows its writer), and
learns of the tool's end from the same set. Threads would count against the sandbox's
process limit (a pids cgroup counts threads), which is the tool's budget, not the bridge's.

It runs with ``-I -S`` (no site, no user paths, no environment variables read by Python) and imports
only C modules of the standard library (``_socket``, ``_signal``, ``select``): nothing from the
tool's folder or the workspace is ever imported, and ``socket.py``, ``signal.py`` and
``selectors`` (enum and collections, about 12 ms) do not delay the tool's start. Linux only.
"""

from __future__ import annotations

import _signal  # pyright: ignore[reportMissingImports] -- a C module typeshed has no stub for; signal.py loads enum
import _socket
import os
import select
import sys

BLOCK = 64 * 1024
MAX_CONNECTIONS = 64  # beyond this a new connection is closed at once; the proxy has its own bound
_FORWARDED = (_signal.SIGTERM, _signal.SIGHUP, _signal.SIGQUIT, _signal.SIGUSR1, _signal.SIGUSR2)
_IN, _OUT = select.EPOLLIN, select.EPOLLOUT
_READABLE = select.EPOLLIN | select.EPOLLHUP | select.EPOLLERR  # a hang-up or error shows on the next recv
_WRITABLE = select.EPOLLOUT | select.EPOLLHUP | select.EPOLLERR


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        sys.stderr.write("usage: bridge.py SOCKET PORT -- PROGRAM [ARG...]\n")
        return 2
    _signal.signal(_signal.SIGINT, _signal.SIG_IGN)  # the tool gets the group's interrupt itself
    unix_path, port, command = argv[0], int(argv[1]), argv[3:]
    listener = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", port))  # before the tool runs: it never finds the port free
    listener.listen(MAX_CONNECTIONS)
    listener.setblocking(False)
    try:
        pid = os.fork()
    except OSError as exc:
        sys.stderr.write(f"sandbox network bridge: cannot start {command[0]}: {exc}\n")
        return 126
    if pid == 0:
        _run(command)  # never returns
    _detach_stdio()
    wake_read, wake_write = os.pipe()  # SIGCHLD lands here, so epoll hears the tool end
    os.set_blocking(wake_read, False)
    os.set_blocking(wake_write, False)
    _signal.set_wakeup_fd(wake_write)
    _signal.signal(_signal.SIGCHLD, _ignore)  # Bridge.run looks with waitpid first: no end is missed
    for number in _FORWARDED:
        _signal.signal(number, lambda sig, _frame: _forward(pid, sig))
    return _exit_as(Bridge(listener, unix_path, wake_read).run(pid))


def _ignore(_sig: int, _frame: object) -> None:
    pass


def _run(command: list[str]) -> None:
    """In the child: restore default signal dispositions and become the tool's program."""
    # Python ignores SIGPIPE and SIGXFSZ, the bridge SIGINT; exec would keep that (and a Python
    # started with SIGINT ignored never raises KeyboardInterrupt).
    for number in (_signal.SIGPIPE, _signal.SIGXFSZ, _signal.SIGINT):
        _signal.signal(number, _signal.SIG_DFL)
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        os.write(2, f"sandbox: cannot run {command[0]}: {exc.strerror}\n".encode(errors="replace"))
        os._exit(127 if isinstance(exc, FileNotFoundError) else 126)


def _detach_stdio() -> None:
    """The tool owns stdin and stdout (a worker's protocol pipes) and whatever else it inherited:
    the bridge keeps none of them open, so their ends see EOF when the tool's copies close."""
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1):
        os.dup2(null, fd)
    os.close(null)
    for fd in [int(name) for name in os.listdir("/proc/self/fd")]:
        if fd > 2 and _inherited(fd):
            os.close(fd)


def _inherited(fd: int) -> bool:
    """Descriptors the bridge was given (Python opens its own close-on-exec)."""
    try:
        return os.get_inheritable(fd)
    except OSError:  # the descriptor that listed /proc/self/fd, closed since
        return False


def _forward(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _exit_as(status: int) -> int:
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        _signal.signal(number, _signal.SIG_DFL)
        os.kill(os.getpid(), number)  # end as the tool ended, so the sidecar words the same signal
        return 128 + number
    return os.waitstatus_to_exitcode(status)


class Direction:
    """Bytes from ``source`` to ``sink``: at most BLOCK waiting, then EOF passed on once."""

    def __init__(self, source: _socket.socket, sink: _socket.socket) -> None:
        self.source, self.sink = source, sink
        self.waiting = b""
        self.eof = False
        self.done = False

    def wants_read(self) -> bool:
        return not self.eof and not self.waiting

    def send(self) -> None:
        if self.waiting:
            try:
                sent = self.sink.send(self.waiting)
            except BlockingIOError:
                return
            self.waiting = self.waiting[sent:]

    def finish(self) -> None:
        if self.eof and not self.waiting and not self.done:
            self.done = True
            try:
                self.sink.shutdown(_socket.SHUT_WR)
            except OSError:
                pass


class Pair:
    """One connection of the tool and its counterpart on the proxy's socket."""

    def __init__(self, tool: _socket.socket, proxy: _socket.socket) -> None:
        self.up, self.down = Direction(tool, proxy), Direction(proxy, tool)
        self.sockets = (tool, proxy)


class Bridge:
    def __init__(self, listener: _socket.socket, unix_path: str, wake: int) -> None:
        self.listener, self.unix_path, self.wake = listener, unix_path, wake
        self.epoll = select.epoll()
        self.owners: dict[int, tuple[Pair, _socket.socket]] = {}  # fd -> its connection
        self.interest: dict[int, int] = {}  # fd -> events it is registered for

    def run(self, pid: int) -> int:
        """Carry connections until the tool ``pid`` ends; its wait status."""
        self.epoll.register(self.listener.fileno(), _IN)
        self.epoll.register(self.wake, _IN)
        while True:
            ended, status = os.waitpid(pid, os.WNOHANG)
            if ended:
                return status
            for fd, mask in self.epoll.poll():
                if fd == self.listener.fileno():
                    self.accept()
                elif fd == self.wake:
                    try:
                        os.read(self.wake, 512)
                    except BlockingIOError:
                        pass
                elif fd in self.owners:
                    pair, sock = self.owners[fd]
                    self.step(pair, sock, mask)

    def accept(self) -> None:
        try:
            fd, _ = self.listener._accept()  # pyright: ignore[reportAttributeAccessIssue] -- what socket.py's accept wraps
        except OSError:
            return
        tool = _socket.socket(fileno=fd)
        if len(self.owners) >= 2 * MAX_CONNECTIONS:
            tool.close()
            return
        proxy = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        try:
            proxy.connect(self.unix_path)  # local: completes at once or fails (backlog full)
        except OSError:
            proxy.close()
            tool.close()
            return
        tool.setblocking(False)
        proxy.setblocking(False)
        pair = Pair(tool, proxy)
        for sock in pair.sockets:
            self.owners[sock.fileno()] = (pair, sock)
            self._interest(sock, _IN)

    def step(self, pair: Pair, sock: _socket.socket, mask: int) -> None:
        try:
            for direction in (pair.up, pair.down):
                if mask & _READABLE and direction.source is sock and direction.wants_read():
                    data = sock.recv(BLOCK)
                    direction.waiting, direction.eof = data, not data
                    direction.send()  # most often the other side takes it at once: no second poll
                if mask & _WRITABLE and direction.sink is sock:
                    direction.send()
                direction.finish()
        except BlockingIOError:
            pass
        except OSError:  # reset, or the proxy went away: this connection only
            self.close(pair)
            return
        if pair.up.done and pair.down.done:
            self.close(pair)
            return
        for each in pair.sockets:
            events = 0
            for direction in (pair.up, pair.down):
                if direction.source is each and direction.wants_read():
                    events |= _IN
                if direction.sink is each and direction.waiting:
                    events |= _OUT
            self._interest(each, events)

    def _interest(self, sock: _socket.socket, events: int) -> None:
        fd = sock.fileno()
        registered = self.interest.get(fd)
        if events == registered or (not events and registered is None):
            return
        if not events:
            self.epoll.unregister(fd)
            del self.interest[fd]
            return
        if registered is None:
            self.epoll.register(fd, events)
        else:
            self.epoll.modify(fd, events)
        self.interest[fd] = events

    def close(self, pair: Pair) -> None:
        for sock in pair.sockets:
            fd = sock.fileno()
            if self.interest.pop(fd, None) is not None:
                self.epoll.unregister(fd)
            self.owners.pop(fd, None)
            sock.close()


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stderr.flush()
    os._exit(code)  # the tool has ended: skip the interpreter's teardown (a few ms on every call's end)

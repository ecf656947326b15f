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

It is one thread: a selector carries every connection, with at most 64 KiB waiting in each
direction (a direction is not read while its bytes wait, so a slow reader slows its writer), and
learns of the tool's end from the same selector. Threads would count against the sandbox's
process limit (a pids cgroup counts threads), which is the tool's budget, not the bridge's.

It runs with ``-I -S`` (no site, no user paths, no environment variables read by Python) and imports
only the standard library: nothing from the tool's folder or the workspace is ever imported.
"""

from __future__ import annotations

import os
import selectors
import signal
import socket
import sys

BLOCK = 64 * 1024
MAX_CONNECTIONS = 64  # beyond this a new connection is closed at once; the proxy has its own bound
_FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        sys.stderr.write("usage: bridge.py SOCKET PORT -- PROGRAM [ARG...]\n")
        return 2
    unix_path, port, command = argv[0], int(argv[1]), argv[3:]
    listener = socket.create_server(("127.0.0.1", port), backlog=MAX_CONNECTIONS)
    listener.setblocking(False)
    wake_read, wake_write = os.pipe()  # SIGCHLD lands here, so the selector hears the tool end
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda _sig, _frame: None)
    try:
        pid = os.fork()
    except OSError as exc:
        sys.stderr.write(f"sandbox network bridge: cannot start {command[0]}: {exc}\n")
        return 126
    if pid == 0:
        _run(command)  # never returns
    _detach_stdio()
    for number in _FORWARDED:
        signal.signal(number, lambda sig, _frame: _forward(pid, sig))
    return _exit_as(Bridge(listener, unix_path, wake_read).run(pid))


def _run(command: list[str]) -> None:
    """In the child: restore default signal dispositions and become the tool's program."""
    signal.set_wakeup_fd(-1)
    for number in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGCHLD):  # exec keeps an ignored signal ignored
        signal.signal(number, signal.SIG_DFL)
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
        signal.signal(number, signal.SIG_DFL)
        os.kill(os.getpid(), number)  # end as the tool ended, so the sidecar words the same signal
        return 128 + number
    return os.waitstatus_to_exitcode(status)


class Direction:
    """Bytes from ``source`` to ``sink``: at most BLOCK waiting, then EOF passed on once."""

    def __init__(self, source: socket.socket, sink: socket.socket) -> None:
        self.source, self.sink = source, sink
        self.waiting = b""
        self.eof = False
        self.done = False

    def wants_read(self) -> bool:
        return not self.eof and not self.waiting

    def finish(self) -> None:
        if self.eof and not self.waiting and not self.done:
            self.done = True
            try:
                self.sink.shutdown(socket.SHUT_WR)
            except OSError:
                pass


def _send(direction: Direction) -> None:
    if direction.waiting:
        try:
            sent = direction.sink.send(direction.waiting)
        except BlockingIOError:
            return
        direction.waiting = direction.waiting[sent:]


class Pair:
    """One connection of the tool and its counterpart on the proxy's socket."""

    def __init__(self, tool: socket.socket, proxy: socket.socket) -> None:
        self.up, self.down = Direction(tool, proxy), Direction(proxy, tool)


class Bridge:
    def __init__(self, listener: socket.socket, unix_path: str, wake: int) -> None:
        self.listener, self.unix_path, self.wake = listener, unix_path, wake
        self.selector = selectors.DefaultSelector()
        self.pairs = 0

    def run(self, pid: int) -> int:
        """Carry connections until the tool ``pid`` ends; its wait status."""
        self.selector.register(self.listener, selectors.EVENT_READ, None)
        self.selector.register(self.wake, selectors.EVENT_READ, None)
        while True:
            ended, status = os.waitpid(pid, os.WNOHANG)
            if ended:
                return status
            for key, mask in self.selector.select():
                if key.fileobj is self.listener:
                    self.accept()
                elif key.fileobj == self.wake:
                    try:
                        os.read(self.wake, 512)
                    except BlockingIOError:
                        pass
                else:
                    self.step(key.data, key.fileobj, mask)  # type: ignore[arg-type] -- registered sockets only

    def accept(self) -> None:
        try:
            tool, _ = self.listener.accept()
        except OSError:
            return
        if self.pairs >= MAX_CONNECTIONS:
            tool.close()
            return
        proxy = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            proxy.connect(self.unix_path)  # local: completes at once or fails (backlog full)
        except OSError:
            proxy.close()
            tool.close()
            return
        tool.setblocking(False)
        proxy.setblocking(False)
        pair = Pair(tool, proxy)
        self.pairs += 1
        self.selector.register(tool, selectors.EVENT_READ, pair)
        self.selector.register(proxy, selectors.EVENT_READ, pair)

    def step(self, pair: Pair, sock: socket.socket, mask: int) -> None:
        try:
            for direction in (pair.up, pair.down):
                if mask & selectors.EVENT_READ and direction.source is sock and direction.wants_read():
                    data = sock.recv(BLOCK)
                    direction.waiting, direction.eof = data, not data
                    _send(direction)  # most often the other side takes it at once: no second select
                if mask & selectors.EVENT_WRITE and direction.sink is sock:
                    _send(direction)
                direction.finish()
        except BlockingIOError:
            pass
        except OSError:  # reset, or the proxy went away: this connection only
            self.close(pair)
            return
        if pair.up.done and pair.down.done:
            self.close(pair)
            return
        for sock_ in (pair.up.source, pair.down.source):
            events = 0
            for direction in (pair.up, pair.down):
                if direction.source is sock_ and direction.wants_read():
                    events |= selectors.EVENT_READ
                if direction.sink is sock_ and direction.waiting:
                    events |= selectors.EVENT_WRITE
            self._interest(sock_, events, pair)

    def _interest(self, sock: socket.socket, events: int, pair: Pair) -> None:
        registered = sock in self.selector.get_map()
        if events and registered:
            self.selector.modify(sock, events, pair)
        elif events:
            self.selector.register(sock, events, pair)
        elif registered:
            self.selector.unregister(sock)

    def close(self, pair: Pair) -> None:
        for sock in (pair.up.source, pair.down.source):
            if sock in self.selector.get_map():
                self.selector.unregister(sock)
            sock.close()
        self.pairs -= 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

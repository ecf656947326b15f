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

It runs with ``-I -S`` (no site, no user paths, no environment variables read by Python) and imports
only the standard library: nothing from the tool's folder or the workspace is ever imported.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading

BLOCK = 64 * 1024
MAX_CONNECTIONS = 64  # beyond this a new connection is closed at once; the proxy has its own bound
_FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        sys.stderr.write("usage: bridge.py SOCKET PORT -- PROGRAM [ARG...]\n")
        return 2
    unix_path, port, command = argv[0], int(argv[1]), argv[3:]
    listener = socket.create_server(("127.0.0.1", port), backlog=MAX_CONNECTIONS)
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
    slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
    threading.Thread(target=_accept, args=(listener, unix_path, slots), daemon=True).start()
    _, status = os.waitpid(pid, 0)
    return _exit_as(status)


def _run(command: list[str]) -> None:
    """In the child: restore default signal dispositions and become the tool's program."""
    for number in (signal.SIGPIPE, signal.SIGXFSZ):  # Python ignores them; exec would keep that
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


def _accept(listener: socket.socket, unix_path: str, slots: threading.BoundedSemaphore) -> None:
    while True:
        try:
            conn, _ = listener.accept()
        except OSError:
            continue
        if not slots.acquire(blocking=False):
            conn.close()
            continue
        threading.Thread(target=_carry, args=(conn, unix_path, slots), daemon=True).start()


def _carry(conn: socket.socket, unix_path: str, slots: threading.BoundedSemaphore) -> None:
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(unix_path)
    except OSError:
        upstream.close()
        conn.close()
        slots.release()
        return
    back = threading.Thread(target=_pump, args=(upstream, conn), daemon=True)
    back.start()
    _pump(conn, upstream)
    back.join()
    conn.close()
    upstream.close()
    slots.release()


def _pump(source: socket.socket, sink: socket.socket) -> None:
    """Copy until EOF or an error, then half-close ``sink`` so the other side sees the end; a
    blocking sendall is the backpressure: a slow reader slows the writer."""
    try:
        while chunk := source.recv(BLOCK):
            sink.sendall(chunk)
    except OSError:
        pass
    try:
        sink.shutdown(socket.SHUT_WR)
    except OSError:
        pass


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

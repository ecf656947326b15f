"""A local model API for the provider tests: replays recorded SSE streams and canned errors over
real HTTP/1.1 (chunked, keep-alive) on 127.0.0.1, and records every request it was sent."""

from __future__ import annotations

import json
import socket
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

STREAMS = Path(__file__).resolve().parents[1] / "fixtures" / "streams"


def events(name: str) -> list[str]:
    """A recorded stream's SSE events, each with its blank-line terminator."""
    text = (STREAMS / name).read_text(encoding="utf-8")
    return [e + "\n\n" for e in text.split("\n\n") if e.strip()]


@dataclass
class Reply:
    status: int = 200
    events: list[str] = field(default_factory=list)  # an SSE stream, sent one event per chunk
    body: Any = None  # a JSON body instead of a stream
    headers: dict[str, str] = field(default_factory=dict)
    cut_after: int | None = None  # drop the connection after this many events
    hang_after: int | None = None  # send this many events, then wait for the client to go away


@dataclass
class Seen:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


class StreamServer:
    def __init__(self) -> None:
        self.replies: deque[Reply] = deque()
        self.requests: list[Seen] = []
        self.client_left = threading.Event()  # a stream's client closed it before its end
        handler = type("Handler", (_Handler,), {"owner": self})
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def queue(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    def start(self) -> StreamServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    owner: StreamServer

    def log_message(self, format: str, *args: Any) -> None:  # keep pytest's output clean
        pass

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.owner.requests.append(Seen(self.path, {k.lower(): v for k, v in self.headers.items()},
                                        json.loads(raw or b"{}")))
        reply = self.owner.replies.popleft() if self.owner.replies else Reply(500, body={"error": {
            "message": "the test queued no reply for this request", "type": "test_error"}})
        if reply.body is not None or not reply.events:
            data = json.dumps(reply.body if reply.body is not None else {}).encode()
            self.send_response(reply.status)
            headers = {"Content-Type": "application/json", "Content-Length": str(len(data))} | reply.headers
            for k, v in headers.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)
            return
        self.send_response(reply.status)
        for k, v in ({"Content-Type": "text/event-stream", "Transfer-Encoding": "chunked",
                      "Cache-Control": "no-cache"} | reply.headers).items():
            self.send_header(k, v)
        self.end_headers()
        try:
            for n, event in enumerate(reply.events):
                if n == reply.cut_after:
                    self._drop()
                    return
                if n == reply.hang_after:
                    self._wait_for_client()
                    return
                chunk = event.encode()
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):  # the client went away before the end
            self.owner.client_left.set()
            self.close_connection = True

    def _drop(self) -> None:
        """Mid-body, as a dying proxy or server would: no terminating chunk."""
        self.wfile.flush()
        self.connection.shutdown(socket.SHUT_RDWR)
        self.close_connection = True

    def _wait_for_client(self) -> None:
        self.connection.settimeout(10)
        try:
            while self.connection.recv(1024):
                pass
            self.owner.client_left.set()
        except TimeoutError:
            pass
        except ConnectionResetError:  # closed with our chunks unread: a reset rather than a FIN
            self.owner.client_left.set()
        self.close_connection = True

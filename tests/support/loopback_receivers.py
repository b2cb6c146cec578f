"""Receivers on 127.0.0.1 that count every connection or datagram they get: HTTP (any method,
headers kept), SMTP (aiosmtpd) and UDP. A test that says "nothing reached it" reads 0 here,
counted where the connection is accepted, before any protocol."""

from __future__ import annotations

import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP

from tests.support.ports import free_port


class Counter:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.count = 0
        self.seen: list[Any] = []

    def add(self, what: Any = None) -> None:
        with self._lock:
            self.count += 1
            if what is not None:
                self.seen.append(what)

    def reset(self) -> None:
        with self._lock:
            self.count, self.seen = 0, []


class HttpReceiver:
    """Answers 200 to every request; counts connections and keeps (method, path, headers)."""

    def __init__(self) -> None:
        self.connections, self.requests = Counter(), Counter()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def _any(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", 0) or 0))
                receiver.requests.add((self.command, self.path, dict(self.headers)))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _any  # noqa: N815

            def log_message(self, format: str, *args: object) -> None:
                pass

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def get_request(self):
                accepted = super().get_request()
                receiver.connections.add()
                return accepted

        self._server = Server(("127.0.0.1", 0), Handler)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> HttpReceiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


class SmtpReceiver:
    """An SMTP server that takes any message; counts connections (sessions) and messages."""

    def __init__(self) -> None:
        self.connections, self.messages = Counter(), Counter()
        self.port = free_port()
        receiver = self

        class CountingSmtp(SMTP):
            def connection_made(self, transport: Any) -> None:
                receiver.connections.add()
                super().connection_made(transport)

        class CountingController(Controller):
            def factory(self) -> SMTP:
                return CountingSmtp(self.handler, **self.SMTP_kwargs)

        self._controller = CountingController(self, hostname="127.0.0.1", port=self.port)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.messages.add(envelope.content)
        return "250 Message accepted"

    def __enter__(self) -> SmtpReceiver:
        self._controller.start()
        self.connections.reset()  # the controller's own check that it is up
        return self

    def __exit__(self, *exc: object) -> None:
        self._controller.stop()


class UdpReceiver:
    """Counts every datagram that arrives on its port."""

    def __init__(self) -> None:
        self.datagrams = Counter()
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._socket.bind(("127.0.0.1", 0))
        self._socket.settimeout(0.2)
        self.port = self._socket.getsockname()[1]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                data, _ = self._socket.recvfrom(65536)
            except TimeoutError:
                continue
            except OSError:
                return
            self.datagrams.add(data)

    def __enter__(self) -> UdpReceiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._socket.close()

"""ForwardProxy: the project's own forward proxy, for the demo, the tests and the benchmarks.

Every account is bound to a proxy, and the demo social network tells proxies apart by the
address a request comes from. So each ForwardProxy connects out from its own
`outgoing_address`: on Linux any 127.0.0.0/8 address is a source on loopback, and a site on
127.0.0.1 sees each proxy as a distinct client. It speaks what clients send a proxy:
absolute-URI requests for plain http (one request per connection, answered with
`Connection: close`) and `CONNECT` tunnels (https, browsers). With a `username` it asks for
Basic credentials (407); the credentials never go further. `log` keeps what went through.

Faults, set at runtime with `proxy.mode = ...`, stand for what real proxies do:
- "refuse": the proxy stops listening and drops its open connections, so a client's connect is
  refused at once (httpx raises `ConnectError`), as with a dead proxy. The port stays bound,
  not listening, and back in another mode the proxy listens on it again;
- "stall": a request is read and never answered, for `stall_s` or until the proxy closes;
- "block": every request is answered 429 with `proxy-blocked` in the body: a proxy whose exit
  address the site has blocked.
"""

from __future__ import annotations

import base64
import binascii
import collections
import contextlib
import dataclasses
import hmac
import socket
import threading
from typing import Self
from urllib.parse import urlsplit

from crawlsched.drivers.browser_proxy import IDLE_S, read_head, relay

MODES = ("ok", "refuse", "stall", "block")
BLOCKED_MARKER = b"proxy-blocked"
MAX_BODY_BYTES = 1024 * 1024
_BLOCKED_BODY = BLOCKED_MARKER + b": the site blocks this exit address\n"
_HOP_BY_HOP = (b"proxy-authorization:", b"proxy-connection:", b"connection:", b"keep-alive:")
_ANSWERS = {
    400: b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    407: b"HTTP/1.1 407 Proxy Authentication Required\r\n"
    b'Proxy-Authenticate: Basic realm="crawlsched"\r\nContent-Length: 0\r\n'
    b"Connection: close\r\n\r\n",
    411: b"HTTP/1.1 411 Length Required\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    413: b"HTTP/1.1 413 Content Too Large\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    429: b"HTTP/1.1 429 Too Many Requests\r\nContent-Type: text/plain\r\n"
    + f"Content-Length: {len(_BLOCKED_BODY)}\r\nConnection: close\r\n\r\n".encode()
    + _BLOCKED_BODY,
    502: b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
}


@dataclasses.dataclass(frozen=True)
class ProxyRequest:
    """One request as the proxy saw it. `path` is None for a CONNECT; `status` is the answer
    (the site's for a plain-http request), None when none was sent (a stall); `cookie` is the
    request's Cookie header (plain http only: a tunnel's bytes are not read)."""

    method: str
    target_host: str
    target_port: int
    path: str | None
    status: int | None
    client_user: str | None
    cookie: str | None = None


@dataclasses.dataclass(frozen=True)
class _Request:
    method: str
    host: str
    port: int
    path: str | None
    version: str
    headers: list[bytes]
    body: bytes

    def header(self, name: str) -> str | None:
        prefix = f"{name.lower()}:".encode()
        for line in self.headers:
            if line.lower().startswith(prefix):
                return line[len(prefix) :].strip().decode("latin-1")
        return None


def _parse(head: bytes, body: bytes) -> _Request | None:
    request_line, *headers = head.split(b"\r\n")
    try:
        method, target, version = request_line.decode("latin-1").split(" ", 2)
        if method == "CONNECT":
            host, _, port = target.rpartition(":")
            return _Request(method, host.strip("[]"), int(port), None, version, headers, body)
        parts = urlsplit(target)
        if parts.scheme != "http" or not parts.hostname:
            return None
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        return _Request(method, parts.hostname, parts.port or 80, path, version, headers, body)
    except ValueError:
        return None


class ForwardProxy:
    """`with ForwardProxy("127.0.0.3", "user", "pw") as proxy:` then `proxy.url`."""

    def __init__(
        self,
        outgoing_address: str = "127.0.0.2",
        username: str | None = None,
        password: str | None = None,
        mode: str = "ok",
        stall_s: float = 30.0,
    ) -> None:
        _check_mode(mode)
        self.outgoing_address = outgoing_address
        self.stall_s = stall_s
        self._credentials = None if username is None else (username, password or "")
        self._closed = threading.Event()
        # Behind _lock: _mode, _listener, _open (sockets to drop on close), _threads, _log and
        # the counters `requests` (every request read) and `refused` (407s).
        self._lock = threading.Lock()
        self._mode = "refuse"
        self._listener = self._bound(0)
        self.port: int = self._listener.getsockname()[1]
        self._open: set[socket.socket] = set()
        self._threads: set[threading.Thread] = set()
        self._log: collections.deque[ProxyRequest] = collections.deque(maxlen=100_000)
        self.requests = 0
        self.refused = 0
        self._initial_mode = mode

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log(self) -> list[ProxyRequest]:
        with self._lock:
            return list(self._log)

    @property
    def mode(self) -> str:
        with self._lock:
            return self._mode

    @mode.setter
    def mode(self, mode: str) -> None:
        _check_mode(mode)
        with self._lock:
            before, self._mode = self._mode, mode
            if self._closed.is_set() or (before == "refuse") == (mode == "refuse"):
                return
            if mode == "refuse":
                _drop(self._listener)
                self._listener = self._bound(self.port)
                for sock in self._open:
                    _drop(sock, close=False)
            else:
                self._listener.listen(64)
                self._start(self._accept, self._listener)

    def __enter__(self) -> Self:
        self.mode = self._initial_mode
        return self

    def __exit__(self, *exc: object) -> None:
        self._closed.set()
        with self._lock:
            _drop(self._listener)
            for sock in self._open:
                _drop(sock, close=False)
            threads = list(self._threads)
        for thread in threads:
            thread.join(timeout=5)

    # -- connections -------------------------------------------------------------------------

    @staticmethod
    def _bound(port: int) -> socket.socket:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", port))
        return listener

    def _start(self, target, sock: socket.socket) -> None:
        """A daemon thread for `target(sock)`, listed (under _lock) until it ends."""
        thread = threading.Thread(target=self._run, args=(target, sock), daemon=True)
        self._threads.add(thread)
        thread.start()

    def _run(self, target, sock: socket.socket) -> None:
        try:
            target(sock)
        finally:
            with self._lock:
                self._threads.discard(threading.current_thread())

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # the listener was closed: "refuse", or the proxy closed
            with self._lock:
                if self._closed.is_set():
                    client.close()
                    return
                self._open.add(client)
                self._start(self._serve, client)

    def _serve(self, client: socket.socket) -> None:
        try:
            client.settimeout(IDLE_S)
            read = read_head(client)
            request = _parse(*read) if read is not None else None
            if request is None:
                if read is not None:
                    client.sendall(_ANSWERS[400])
                return
            self._answer(client, request)
        except OSError:
            pass
        finally:
            with self._lock:
                self._open.discard(client)
            client.close()

    def _answer(self, client: socket.socket, request: _Request) -> None:
        with self._lock:
            self.requests += 1
            mode = self._mode
        if mode == "refuse":
            return  # accepted just before the switch: dropped like the rest
        if mode == "stall":
            self._record(request, None, None)
            self._closed.wait(self.stall_s)
            return
        allowed, user = self._authenticated(request)
        status = 407 if not allowed else 429 if mode == "block" else None
        if status is None and request.path is not None:
            request, status = _with_body(client, request)
        if status is not None:
            if status == 407:
                with self._lock:
                    self.refused += 1
            self._record(request, status, user)
            client.sendall(_ANSWERS[status])
            return
        try:
            upstream = socket.create_connection(
                (request.host, request.port), timeout=IDLE_S,
                source_address=(self.outgoing_address, 0),
            )  # fmt: skip
        except OSError:
            self._record(request, 502, user)
            client.sendall(_ANSWERS[502])
            return
        with upstream:
            with self._lock:
                self._open.add(upstream)
            try:
                if self._open_exchange(client, upstream, request, user):
                    relay(client, upstream)
            finally:
                with self._lock:
                    self._open.discard(upstream)

    def _open_exchange(
        self, client: socket.socket, upstream: socket.socket, request: _Request, user
    ) -> bool:
        """Start the tunnel, or send the request and pass its answer's head on; True when
        there is more to relay."""
        if request.path is None:
            self._record(request, 200, user)
            client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            upstream.sendall(request.body)
            return True
        headers = [line for line in request.headers if not line.lower().startswith(_HOP_BY_HOP)]
        line = f"{request.method} {request.path} {request.version}\r\n".encode("latin-1")
        upstream.sendall(line + b"".join(h + b"\r\n" for h in headers))
        upstream.sendall(b"Connection: close\r\n\r\n" + request.body)
        answer = read_head(upstream)
        if answer is None:
            self._record(request, 502, user)
            client.sendall(_ANSWERS[502])
            return False
        status_line, *answer_headers = answer[0].split(b"\r\n")
        fields = status_line.split(b" ", 2)
        status = int(fields[1]) if len(fields) > 1 and fields[1].isdigit() else None
        kept = [h for h in answer_headers if not h.lower().startswith(_HOP_BY_HOP)]
        self._record(request, status, user)
        client.sendall(b"\r\n".join([status_line, *kept, b"Connection: close", b"", answer[1]]))
        return True

    def _authenticated(self, request: _Request) -> tuple[bool, str | None]:
        """Whether the request may pass, and the user its Proxy-Authorization names (None
        when the proxy asks for no credentials)."""
        if self._credentials is None:
            return True, None
        scheme, _, encoded = (request.header("Proxy-Authorization") or "").partition(" ")
        try:
            given = base64.b64decode(encoded, validate=True)
        except binascii.Error:
            return False, None
        user, password = self._credentials
        if scheme.lower() != "basic" or not hmac.compare_digest(
            given, f"{user}:{password}".encode()
        ):
            return False, None
        return True, user

    def _record(self, request: _Request, status: int | None, user: str | None) -> None:
        cookie = request.header("Cookie") if request.path is not None else None
        entry = ProxyRequest(
            request.method, request.host, request.port, request.path, status, user, cookie
        )
        with self._lock:
            self._log.append(entry)


def _with_body(client: socket.socket, request: _Request) -> tuple[_Request, int | None]:
    """The request with all of its body (forwarded before the answer is awaited), or the error
    status to answer: 411 for a body without a length, 413 for one over MAX_BODY_BYTES."""
    if request.header("Transfer-Encoding") is not None:
        return request, 411
    length = request.header("Content-Length") or "0"
    if not length.isdigit() or int(length) > MAX_BODY_BYTES:
        return request, 413
    body = request.body
    while len(body) < int(length):
        chunk = client.recv(65536)
        if not chunk:
            break
        body += chunk
    return dataclasses.replace(request, body=body), None


def _check_mode(mode: str) -> None:
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")


def _drop(sock: socket.socket, close: bool = True) -> None:
    """Shut a socket down (a thread blocked on it wakes up), and close it unless its own
    thread will."""
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    if close:
        sock.close()

"""A filtering forward proxy for browser sessions: what a page loads by itself — redirects,
frames, scripts, `fetch` — goes through it and is held to the crawl's target rules.

Chrome is started with `--proxy-server` pointing here and `--proxy-bypass-list=<-loopback>`
(without it Chrome sends loopback requests directly). For each request (an absolute-URI
request for http, `CONNECT` for https) the proxy resolves the host once, refuses it with 403 if
any address is refused (`targets.check_addresses`, the allowed networks of the settings), and
otherwise connects to the checked address (502 when none answers) — the same rule, and the
same rebinding defence, as the HTTP client's. One proxy per worker process, on a loopback port.

With an `upstream` proxy (the account's), the checked address is reached through a CONNECT
tunnel from that proxy instead of directly: the site sees the upstream's address, and the
upstream's credentials go to the upstream only.
"""

from __future__ import annotations

import collections
import contextlib
import select
import socket
import socketserver
import threading
from urllib.parse import urlsplit

from crawlsched.drivers.targets import Resolver, check_addresses, resolve
from crawlsched.drivers.upstream import TunnelRefused, Upstream, open_tunnel
from crawlsched.errors import UnsafeTarget
from crawlsched.logs import get_logger

log = get_logger(__name__)

IDLE_S = 60.0
_FORBIDDEN = b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n"
_BAD_GATEWAY = b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n"
MAX_HEAD_BYTES = 64 * 1024


class _Handler(socketserver.BaseRequestHandler):
    server: FilteringProxy

    def handle(self) -> None:
        client: socket.socket = self.request
        client.settimeout(IDLE_S)
        read = read_head(client)
        if read is None:
            return
        head, body = read
        request_line, _, rest = head.partition(b"\r\n")
        try:
            method, target, version = request_line.decode("latin-1").split(" ", 2)
        except ValueError:
            return
        if method == "CONNECT":
            host, _, port = target.rpartition(":")
            upstream = self.server.open(host.strip("[]"), int(port) if port.isdigit() else 443)
            if isinstance(upstream, bytes):
                client.sendall(upstream)
                return
            client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        else:
            try:
                parts = urlsplit(target)
                port = parts.port or 80
            except ValueError:
                parts, port = urlsplit(""), 0
            if parts.scheme != "http" or not parts.hostname:
                client.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
                return
            upstream = self.server.open(parts.hostname, port)
            if isinstance(upstream, bytes):
                client.sendall(upstream)
                return
            path = parts.path or "/"
            if parts.query:
                path += f"?{parts.query}"
            # One request per upstream connection: the browser's next one comes through here.
            headers = b"\r\n".join(
                line
                for line in rest.split(b"\r\n")
                if not line.lower().startswith((b"proxy-connection:", b"connection:"))
            )
            upstream.sendall(
                f"{method} {path} {version}\r\n".encode("latin-1")
                + headers
                + b"\r\nConnection: close\r\n\r\n"
                + body  # what of a request body came with the head; the rest is relayed
            )
        with upstream:
            relay(client, upstream)


def read_head(sock: socket.socket) -> tuple[bytes, bytes] | None:
    """The request's head (request line and headers) and any body bytes read with it."""
    data = b""
    while b"\r\n\r\n" not in data:
        try:
            chunk = sock.recv(4096)
        except OSError:
            return None
        if not chunk or len(data) > MAX_HEAD_BYTES:
            return None
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return head, body


def relay(a: socket.socket, b: socket.socket) -> None:
    """Bytes both ways until either side closes, fails, or both are idle for IDLE_S."""
    sockets = [a, b]
    while True:
        readable, _, _ = select.select(sockets, [], [], IDLE_S)
        if not readable:
            return
        for sock in readable:
            try:
                data = sock.recv(65536)
            except OSError:
                return
            if not data:
                return
            (b if sock is a else a).sendall(data)


def _connect_any(addresses: list[str], port: int) -> socket.socket:
    """A connection to the first checked address that answers (all of them were checked)."""
    error: OSError = OSError("resolves to no address")
    for address in addresses:
        try:
            return socket.create_connection((address, port), timeout=IDLE_S)
        except OSError as e:
            error = e
    raise error


def _tunnel_any(upstream: Upstream, addresses: list[str], port: int) -> socket.socket:
    """A tunnel through the upstream proxy to the first checked address it reaches. The
    tunnel names the address, not the host: the upstream must not resolve the name again
    (rebinding), and Chrome's Host header and TLS server name still carry the host. When the
    upstream itself cannot be reached, the other addresses are not tried."""
    error: OSError = OSError("resolves to no address")
    for address in addresses:
        try:
            return open_tunnel(upstream, address, port, IDLE_S)
        except TunnelRefused as e:
            error = e
    raise error


class FilteringProxy(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(
        self,
        allowed_networks: tuple,
        resolver: Resolver = resolve,
        host: str = "127.0.0.1",
        upstream: Upstream | None = None,
    ):
        if upstream is not None and upstream.scheme != "http":
            raise ValueError(
                f"upstream scheme {upstream.scheme!r} is not supported for browsers: "
                f"only http upstream proxies ({upstream.redacted()})"
            )
        super().__init__((host, 0), _Handler)
        self.allowed_networks = allowed_networks
        self.resolver = resolver
        self.upstream = upstream
        # Requests the upstream proxy did not tunnel (unreachable, or it answered other than
        # 200): the caller tells a failing proxy from failing sites by it. Behind _lock.
        self.upstream_failures = 0
        self._lock = threading.Lock()
        # host:port of the latest refused requests (for tests; bounded: the proxy lives as
        # long as the worker process)
        self.refused: collections.deque[str] = collections.deque(maxlen=1000)
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"

    def open(self, host: str, port: int) -> socket.socket | bytes:
        """A connection to the checked address (through the upstream proxy when there is one),
        or the answer to send instead: 403 for a target the rules refuse, 502 for one that
        cannot be reached (or an upstream that would not tunnel to it). Both have an empty body,
        so Chrome shows its error page and the crawl fails the job instead of storing it.

        Refusals are logged at info: Chrome's own background requests land here too, and a
        page asking for a refused address is the page's doing, not the worker's fault."""
        try:
            if not 0 < port < 65536:
                raise UnsafeTarget(f"no such port {port}")
            addresses = self.resolver(host, port)
            check_addresses(f"//{host}:{port}", addresses, self.allowed_networks)
        except (UnsafeTarget, OSError) as e:
            return self._refuse(host, port, e, _FORBIDDEN)
        if self.upstream is None:
            try:
                return _connect_any(addresses, port)
            except OSError as e:
                return self._refuse(host, port, e, _BAD_GATEWAY)
        try:
            return _tunnel_any(self.upstream, addresses, port)
        except OSError as e:
            with self._lock:
                self.upstream_failures += 1
            return self._refuse(host, port, e, _BAD_GATEWAY)

    def _refuse(self, host: str, port: int, error: Exception, answer: bytes) -> bytes:
        self.refused.append(f"{host}:{port}")
        log.info("browser_request_refused", host=host[:200], port=port, reason=str(error)[:200])
        return answer

    def start(self) -> FilteringProxy:
        self._thread.start()
        return self

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            self.shutdown()
            self.server_close()

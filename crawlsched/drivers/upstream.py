"""An upstream proxy: where a worker's browser traffic leaves from, once the filtering proxy has
checked it. Every account is bound to a forward proxy, so the site sees each account always come
from the same address.

`Upstream` is the proxy's address and credentials, validated when made; `open_tunnel` asks it
for a `CONNECT` tunnel to a target. The credentials go to the upstream proxy only: they are in
the CONNECT request, which the proxy consumes, never in what goes through the tunnel, and
`redacted()` is what logs and error messages show.
"""

from __future__ import annotations

import base64
import dataclasses
import socket
from urllib.parse import unquote, urlsplit

SCHEMES = ("http", "https", "socks5")
DEFAULT_PORTS = {"http": 80, "https": 443, "socks5": 1080}
MAX_ANSWER_HEAD_BYTES = 16 * 1024


@dataclasses.dataclass(frozen=True)
class Upstream:
    scheme: str
    host: str
    port: int
    username: str | None = None
    password: str | None = dataclasses.field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.scheme not in SCHEMES:
            raise ValueError(f"upstream scheme must be one of {', '.join(SCHEMES)}")
        if not self.host:
            raise ValueError("upstream host is empty")
        if not 0 < self.port < 65536:
            raise ValueError(f"upstream port must be 1-65535, got {self.port}")
        if self.password is not None and self.username is None:
            raise ValueError("upstream password given without a username")

    @classmethod
    def from_url(
        cls, url: str, username: str | None = None, password: str | None = None
    ) -> Upstream:
        """`http://host:port` (the scheme's usual port when none is given). Credentials may be
        given apart or in the URL (`http://user:pw@host:port`, percent-encoded); given apart,
        they win."""
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError as e:
            raise ValueError(f"upstream URL is not valid: {e}") from None
        if parts.scheme not in SCHEMES:
            raise ValueError(f"upstream scheme must be one of {', '.join(SCHEMES)}")
        if username is None and parts.username is not None:
            username = unquote(parts.username)
            password = unquote(parts.password) if parts.password is not None else None
        port = port if port is not None else DEFAULT_PORTS[parts.scheme]
        return cls(parts.scheme, parts.hostname or "", port, username, password)

    def redacted(self) -> str:
        """The proxy's URL without its credentials (for logs and error messages)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        user = "***@" if self.username is not None else ""
        return f"{self.scheme}://{user}{host}:{self.port}"

    def authorization(self) -> str | None:
        """The `Proxy-Authorization` value for these credentials, None without any."""
        if self.username is None:
            return None
        pair = f"{self.username}:{self.password or ''}".encode()
        return f"Basic {base64.b64encode(pair).decode()}"


class TunnelRefused(ConnectionError):
    """The upstream proxy answered a CONNECT with anything but 200: wrong credentials, a
    target it cannot or will not reach, or no HTTP at all."""


def open_tunnel(upstream: Upstream, host: str, port: int, timeout_s: float) -> socket.socket:
    """A socket tunnelled through the (http) upstream proxy to host:port. TunnelRefused when
    the proxy answers anything but 200; any other OSError when the proxy cannot be reached."""
    sock = socket.create_connection((upstream.host, upstream.port), timeout=timeout_s)
    try:
        target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        lines = [f"CONNECT {target} HTTP/1.1", f"Host: {target}"]
        if (authorization := upstream.authorization()) is not None:
            lines.append(f"Proxy-Authorization: {authorization}")
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        status_line = _answer_head(sock).split(b"\r\n", 1)[0]
        fields = status_line.split(b" ", 2)
        if len(fields) < 2 or fields[1] != b"200":
            answer = status_line[:100].decode("latin-1")
            raise TunnelRefused(f"upstream {upstream.redacted()} answered {answer!r}")
    except BaseException:
        sock.close()
        raise
    return sock


def _answer_head(sock: socket.socket) -> bytes:
    """The proxy's answer head, read a byte at a time: what follows it is the tunnel's, and
    must be left in the socket for whoever relays it."""
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        byte = sock.recv(1)
        if not byte:
            raise TunnelRefused("upstream closed before answering CONNECT")
        if len(head) >= MAX_ANSWER_HEAD_BYTES:
            raise TunnelRefused("upstream's answer to CONNECT is too long")
        head += byte
    return head

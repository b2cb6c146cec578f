"""An httpx client that connects only to addresses it has checked: no DNS rebinding.

`targets.check_target` resolves a URL's host and refuses it if any address is private,
loopback or link-local (unless allowed). But a client that then connects by *name* resolves
again, and a hostile DNS server can answer differently the second time (rebinding). Here the
connection itself is made by a network backend that resolves the host once, checks every
address, and connects to a checked address; TLS still verifies the certificate against the
name (httpcore passes the host name as the TLS server name), and the Host header keeps it.
"""

from __future__ import annotations

import ssl
import typing
import zlib
from http.cookiejar import CookieJar, CookiePolicy

import httpcore
import httpx

from crawlsched.drivers.targets import Resolver, check_addresses, resolve
from crawlsched.errors import UnsafeTarget


class CheckedBackend(httpcore.SyncBackend):
    """httpcore's own socket backend, connecting only to resolved-and-checked addresses."""

    def __init__(self, allowed_networks: tuple, resolver: Resolver = resolve) -> None:
        self.allowed_networks = allowed_networks
        self.resolver = resolver

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: typing.Iterable[typing.Any] | None = None,
    ) -> httpcore.NetworkStream:
        try:
            addresses = self.resolver(host, port)
            check_addresses(f"//{host}:{port}", addresses, self.allowed_networks)
        except UnsafeTarget as e:
            raise httpcore.ConnectError(f"refused: {e}") from None
        if not addresses:
            raise httpcore.ConnectError(f"host {host!r} resolves to no address")
        # Every address was checked: any of them may be tried, as a resolver-driven client
        # would (a host with one dead address stays reachable).
        error: httpcore.ConnectError | None = None
        for address in addresses:
            try:
                return super().connect_tcp(
                    address,
                    port,
                    timeout,
                    local_address=local_address,
                    socket_options=socket_options,
                )
            except httpcore.ConnectError as e:
                error = e
        raise error or httpcore.ConnectError(f"no address of {host!r} answered")


def guarded_client(
    allowed_networks: tuple,
    timeout_s: float,
    resolver: Resolver = resolve,
    ssl_context: ssl.SSLContext | None = None,
) -> httpx.Client:
    """The crawl's shared client. Its pool is httpx's default one with the checked backend
    (httpx exposes no argument for a network backend, so the transport's pool is replaced)."""
    transport = httpx.HTTPTransport()
    transport._pool = httpcore.ConnectionPool(
        ssl_context=ssl_context or httpx.create_ssl_context(),
        max_connections=100,
        max_keepalive_connections=20,
        keepalive_expiry=5.0,
        network_backend=CheckedBackend(allowed_networks, resolver),
    )
    return httpx.Client(transport=transport, timeout=timeout_s, cookies=CookieJar(_NoCookies()))


class _NoCookies(CookiePolicy):
    """The shared client keeps no cookies: httpx would store every response's cookies in the
    client's jar and send them with later requests of any batch (cookies ignore ports), so one
    account's session would ride along with another's, or to the same name on another port.
    A batch's session lives in its own PoliteHttp, sent only to the declared origins."""

    netscape, rfc2965, hide_cookie2 = True, False, False

    def set_ok(self, cookie, request) -> bool:
        return False

    def return_ok(self, cookie, request) -> bool:
        return False

    def domain_return_ok(self, domain, request) -> bool:
        return False

    def path_return_ok(self, path, request) -> bool:
        return False


# The encodings we ask for, and decode ourselves within the byte budget: httpx would inflate a
# small compressed body into any size (a 5 MB gzip bomb is gigabytes).
ACCEPT_ENCODING = "gzip, deflate"


def decode_body(raw: bytes, content_encoding: str, max_bytes: int) -> bytes:
    """The body with its Content-Encoding undone, or ValueError saying why it cannot be: an
    encoding we did not ask for, a corrupt stream, or more than `max_bytes` once inflated."""
    body = raw
    codings = [c.strip().lower() for c in content_encoding.split(",") if c.strip()]
    for coding in reversed(codings):  # applied in order listed, so undone in reverse
        if coding == "identity":
            continue
        if coding not in ("gzip", "x-gzip", "deflate"):
            raise ValueError(f"unsupported content-encoding {coding[:40]!r}")
        try:
            if coding == "deflate":
                try:
                    body = _inflate(body, zlib.MAX_WBITS, max_bytes)
                except zlib.error:  # servers also send raw deflate without the zlib header
                    body = _inflate(body, -zlib.MAX_WBITS, max_bytes)
            else:
                body = _inflate(body, 16 + zlib.MAX_WBITS, max_bytes)
        except zlib.error as e:
            raise ValueError(f"corrupt {coding} body: {e}") from None
    return body


def _inflate(data: bytes, wbits: int, max_bytes: int) -> bytes:
    inflater = zlib.decompressobj(wbits)
    out = inflater.decompress(data, max_bytes + 1)  # never more than the budget + 1 in memory
    if len(out) > max_bytes:
        raise ValueError(f"larger than {max_bytes} bytes once decompressed")
    return out

"""Going out through a leased proxy: the batch's HTTP client through it, and what its answers
say of it.

A proxy has failed when it refuses the connection, stalls or breaks it (`ProxyFailed`), and is
blocked when an answer through it shows a sign its media declares: a status code, or a marker
in the body such as a captcha page's (`ProxyBlocked`). Either ends the batch's use of the proxy:
the proxy rests, and the pages not yet crawled wait for another lease; they have not failed.

The proxy's credentials go in `Proxy-Authorization` to the proxy alone (httpx sends them only
in the CONNECT of an https tunnel, and to the proxy for plain http). Every target is still
checked before it is sent (`PoliteHttp._check`); the proxy then resolves the name itself, so
the connection-time rebinding defence of `net.CheckedBackend` is the proxy's to keep.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from http.cookiejar import CookieJar
from typing import Any

import httpx

from crawlsched.drivers.base import DriverError
from crawlsched.drivers.net import _NoCookies

MARKER_BYTES = 200_000  # only so much of a body is searched for a block's marker


class ProxyFailed(DriverError):
    """The proxy refused, stalled or broke the connection."""


class ProxyBlocked(DriverError):
    """An answer through the proxy shows a block its media declares."""


@dataclass(frozen=True)
class BlockSigns:
    """What a media's answers look like when a proxy's address is blocked."""

    statuses: frozenset[int] = frozenset()
    markers: tuple[str, ...] = ()

    @classmethod
    def of(cls, media_proxy: Mapping[str, Any] | None) -> BlockSigns:
        row = media_proxy or {}
        return cls(
            frozenset(int(s) for s in row.get("block_statuses") or ()),
            tuple(str(m) for m in row.get("block_markers") or () if m),
        )

    def shown_by(self, status: int, body: bytes) -> str | None:
        """Why this answer shows a block, or None."""
        if status in self.statuses:
            return f"status {status}"
        head = body[:MARKER_BYTES].decode("utf-8", errors="replace")
        return next((f"marker {m!r}" for m in self.markers if m in head), None)


class ProxyWatch:
    """What one batch learned of its proxy: whether an answer came through it, and the
    failure that ended its use. Read once the batch's lanes have stopped; `_lock` guards
    `answers` and `failure` while they run."""

    def __init__(self, name: str, tier: int, signs: BlockSigns) -> None:
        self.name, self.tier, self.signs = name, tier, signs
        self._lock = threading.Lock()
        self.answers = 0
        self.failure: DriverError | None = None

    def answered(self, status: int, body: bytes, what: str) -> None:
        """Note an answer; raises ProxyBlocked when it shows a block."""
        reason = self.signs.shown_by(status, body)
        if reason is not None:
            raise self.failed(ProxyBlocked(f"{what}: blocked through proxy {self.name} ({reason})"))
        with self._lock:
            self.answers += 1

    def failed(self, error: DriverError) -> DriverError:
        with self._lock:
            self.failure = self.failure or error
        return error


# Errors that say the proxy (or the way to it) failed, not the page: no answer came back.
PROXY_ERRORS = (
    httpx.ProxyError,
    httpx.ConnectError,
    httpx.TimeoutException,
    httpx.RemoteProtocolError,
    httpx.ReadError,
)


def proxied_client(
    url: str, username: str | None, password: str | None, timeout_s: float
) -> httpx.Client:
    """A client that sends every request through the proxy at `url`; it keeps no cookies
    (a batch's session lives in its own PoliteHttp, as with the shared client)."""
    auth = (username, password) if username is not None and password is not None else None
    return httpx.Client(
        proxy=httpx.Proxy(url, auth=auth),
        timeout=timeout_s,
        cookies=CookieJar(_NoCookies()),
        trust_env=False,  # no HTTP(S)_PROXY or NO_PROXY from the environment: this proxy only
    )


def cookie_rows(cookies: httpx.Cookies) -> list[list[str]]:
    """A session's cookies as rows to keep: [name, value, domain, path]."""
    return [[c.name, c.value or "", c.domain, c.path] for c in cookies.jar]


def restore_cookies(rows: Iterable[Iterable[str]]) -> httpx.Cookies:
    cookies = httpx.Cookies()
    for row in rows:
        name, value, domain, path = (str(v) for v in row)
        cookies.set(name, value, domain=domain, path=path)
    return cookies


class ProxyClients:
    """One client per proxy (and credentials) per process: a client costs ~30 ms to build
    (its TLS context) and keeps its connections to the proxy alive between batches."""

    def __init__(self, timeout_s: float) -> None:
        self._timeout_s = timeout_s
        self._lock = threading.Lock()
        self._clients: dict[tuple[str, str | None, str | None], httpx.Client] = {}

    def client(self, url: str, username: str | None, password: str | None) -> httpx.Client:
        key = (url, username, password)
        with self._lock:
            if key not in self._clients:
                self._clients[key] = proxied_client(url, username, password, self._timeout_s)
            return self._clients[key]

    def close(self) -> None:
        with self._lock:
            clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            client.close()

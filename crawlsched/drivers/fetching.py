"""PoliteHttp: the HTTP client a driver gets for one batch.

Every request, and every redirect hop, goes only to a target `targets.check_target` allows;
the account's credential (a bearer header, the session cookies of its login) goes only to its
media's declared hosts; robots.txt is honoured and each host is paced (`Politeness`). A
response is read within a byte budget and a deadline, so a 50 MB page or a server that never
finishes sending ends that job with a reason instead of holding the worker.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from crawlsched.drivers.base import Account, DriverError
from crawlsched.drivers.net import ACCEPT_ENCODING, decode_body
from crawlsched.drivers.proxied import PROXY_ERRORS, ProxyFailed, ProxyWatch
from crawlsched.drivers.targets import check_target, may_carry_secret, redact
from crawlsched.errors import UnsafeTarget
from crawlsched.resources.host_rules import HostPolicy, host_key

MAX_REDIRECTS = 5
DEFAULT_MAX_BYTES = 5_000_000
DEFAULT_DEADLINE_S = 30.0
USER_AGENT = "crawlsched/1"


def limits_the_account(response: httpx.Response) -> bool:
    """A 429 whose rate-limit headers (`x-rate-limit-reset`, as the platforms send them and
    twscrape reads them) limit the account that sent the request, not the host: the driver
    locks the account for its task, and the host stays open to other accounts and pages."""
    return response.status_code == 429 and "x-rate-limit-reset" in response.headers


class Refused(DriverError):
    """The URL (or a redirect hop) is not a target crawls may reach."""


class RobotsDisallowed(DriverError):
    """The site's robots.txt disallows this URL for our user agent."""


class FetchFailed(DriverError):
    """The request failed: connection, timeout, too large, too slow, too many redirects."""


class Pacer(Protocol):
    """Paces requests per host (`politeness.pacer.ClusterHostPacer`): `slot` returns at the
    request's start time; `observe` hears each answer (a 429 or 503 blocks the host)."""

    def slot(
        self, key: str, policy: HostPolicy | None = None
    ) -> contextlib.AbstractContextManager[None]: ...

    def observe(self, key: str, status: int, retry_after: str | None) -> None: ...

    def key_of(self, url: str) -> str: ...


class Robots(Protocol):
    def allowed(self, url: str, user_agent: str, fetch: Any) -> bool: ...


@dataclass
class PageLoad:
    """What a navigation paced by `PoliteHttp.paced` learned of its answer: the HTTP status
    of the document, when the browser tells it (a browser does not show the headers, so a
    `Retry-After` is not known: the host's backoff applies)."""

    status: int | None = None


class PoliteHttp:
    def __init__(
        self,
        client: httpx.Client,
        *,
        allowed_networks: tuple = (),
        account: Account | None = None,
        secret_hosts: tuple[str, ...] = (),
        pacer: Pacer | None = None,
        robots: Robots | None = None,
        user_agent: str = USER_AGENT,
        max_bytes: int = DEFAULT_MAX_BYTES,
        deadline_s: float = DEFAULT_DEADLINE_S,
        resolver: Any = None,
        on_request: Callable[[], None] | None = None,
        host_policy: HostPolicy | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        proxy: ProxyWatch | None = None,
    ) -> None:
        self._client = client
        # The batch's leased proxy, when `client` goes out through one: what its answers show.
        self.proxy = proxy
        self._monotonic = monotonic  # a response's deadline is on this clock
        # The media's politeness (delay, concurrency, daily pages), the settings' by default.
        self.host_policy = host_policy
        # Called before every request: the crawl's sign of progress (it renews the dispatch).
        self.on_request = on_request
        self.allowed_networks = allowed_networks
        self.account = account
        self.secret_hosts = secret_hosts
        self.pacer = pacer
        self.robots = robots
        self.user_agent = user_agent
        self.max_bytes = max_bytes
        self.deadline_s = deadline_s
        self._resolver = resolver
        # The account's session (cookies set by its declared hosts), for this batch only.
        self.session = httpx.Cookies()
        self.requests = 0  # requests sent, robots.txt included
        self._requests_lock = threading.Lock()  # jobs of a batch may share the client

    # -- the public verbs ----------------------------------------------------------------------

    def get(
        self,
        url: str,
        *,
        params: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        credentials: bool = True,
        follow_redirects: bool = True,
    ) -> httpx.Response:
        """GET with redirects followed hop by hop (or returned as they are: a crawler that
        discovers the target instead fetches each page once per run); the body is read
        (bounded)."""
        if params:
            url = str(httpx.URL(url).copy_merge_params(dict(params)))
        return self._send(
            "GET", url, headers=headers, credentials=credentials, follow=follow_redirects
        )

    def post(
        self,
        url: str,
        *,
        data: Mapping[str, Any] | None = None,
        json: Any = None,
        headers: Mapping[str, str] | None = None,
        credentials: bool = True,
    ) -> httpx.Response:
        return self._send(
            "POST", url, headers=headers, credentials=credentials, data=data, json=json
        )

    def form_login(self, url: str, fields: Mapping[str, str]) -> httpx.Response:
        """POST a login form holding the account's credential: refused unless the URL's host is
        one its media declares, so a look-alike or redirected host never sees it."""
        if not may_carry_secret(url, self.secret_hosts):
            raise Refused(f"login form to {redact(url)!r}: not a declared host of this media")
        return self._send("POST", url, headers=None, credentials=True, data=fields, login=True)

    def robots_first(self, url: str) -> bool:
        """Read the robots.txt of `url`'s site now if this process does not know it yet (from
        the store, or fetched: checked and paced like any request). True when that sent a
        request: the page then waits its host's delay, and a batch over many hosts crawls
        another host's page meanwhile instead of sleeping (`crawl_loop`)."""
        if self.robots is None or self.robots.known(url):
            return False
        sent = self.requests
        self.robots.rules(url, self.user_agent, self._fetch_robots)
        return self.requests > sent

    # -- inside ----------------------------------------------------------------------------------

    def _send(
        self,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str] | None,
        credentials: bool,
        data: Any = None,
        json: Any = None,
        login: bool = False,
        follow: bool = True,
    ) -> httpx.Response:
        deadline = self._monotonic() + self.deadline_s
        for _hop in range(MAX_REDIRECTS + 1):
            if self.on_request is not None:
                self.on_request()
            self._check(url)
            if self.robots is not None and not self.robots.allowed(
                url, self.user_agent, self._fetch_robots
            ):
                raise RobotsDisallowed(f"robots.txt disallows {redact(url)}")
            trusted = credentials and may_carry_secret(url, self.secret_hosts)
            request_headers = {"User-Agent": self.user_agent, **(headers or {})}
            if trusted and self.account is not None and not login and not self.session:
                request_headers["Authorization"] = f"Bearer {self.account.secret}"
            cookies = self.session if trusted else None
            response = self._read(
                method, url, request_headers, cookies, data, json, deadline,
                as_account=trusted and self.account is not None,
            )  # fmt: skip
            if trusted:
                self.session.extract_cookies(response)
            if not response.is_redirect or not follow:
                return response
            # A redirect is a GET without the body (RFC 9110 for 301/302/303; 307/308 keep the
            # method, but a credential-bearing body never follows to another host).
            location = response.headers.get("location", "")
            url = str(response.url.join(location))
            if response.status_code in (307, 308) and may_carry_secret(url, self.secret_hosts):
                continue
            method, data, json, login = "GET", None, None, False
        raise FetchFailed(f"{method} {redact(url)}: more than {MAX_REDIRECTS} redirects")

    def _count_request(self) -> None:
        with self._requests_lock:
            self.requests += 1

    def _check(self, url: str) -> None:
        try:
            if self._resolver is None:
                check_target(url, self.allowed_networks)
            else:
                check_target(url, self.allowed_networks, self._resolver)
        except UnsafeTarget as e:
            raise Refused(f"refused: {e}") from None

    def _read(
        self,
        method: str,
        url: str,
        headers: dict[str, str],
        cookies: httpx.Cookies | None,
        data: Any,
        json: Any,
        deadline: float,
        as_account: bool = False,
    ) -> httpx.Response:
        """`as_account`: the request carried the account's credential or session."""
        key = self._pacing_key(url)
        what = f"{method} {redact(url)}"
        with self._slot(key):
            self._count_request()
            try:
                request = self._client.build_request(
                    method,
                    url,
                    headers={"Accept-Encoding": ACCEPT_ENCODING, **headers},
                    cookies=cookies,
                    data=data,
                    json=json,
                    timeout=self._timeout(deadline, what),
                )
                response = self._client.send(request, stream=True, follow_redirects=False)
            except httpx.HTTPError as e:
                raise self._failure(what, e, deadline) from None
            try:
                raw = bytearray()
                for chunk in response.iter_raw():
                    raw.extend(chunk)
                    if len(raw) > self.max_bytes:
                        raise FetchFailed(f"{what}: larger than {self.max_bytes} bytes")
                    if self._monotonic() > deadline:
                        raise FetchFailed(f"{what}: not finished within {self.deadline_s} s")
            except httpx.HTTPError as e:
                raise self._failure(what, e, deadline) from None
            finally:
                response.close()
        if self.pacer is not None and not (as_account and limits_the_account(response)):
            self.pacer.observe(key, response.status_code, response.headers.get("retry-after"))
        try:
            body = decode_body(
                bytes(raw), response.headers.get("content-encoding", ""), self.max_bytes
            )
        except ValueError as e:
            raise FetchFailed(f"{what}: {e}") from None
        if self.proxy is not None:
            self.proxy.answered(response.status_code, body, what)
        # Rebuilt from the bounded, decoded body; `.text` decodes with replacement, so a broken
        # character encoding is not an error.
        headers_out = [
            (k, v)
            for k, v in response.headers.multi_items()
            if k.lower() not in ("content-encoding", "content-length", "transfer-encoding")
        ]
        rebuilt = httpx.Response(
            response.status_code,
            headers=[*headers_out, ("content-length", str(len(body)))],
            content=body,
            request=response.request,
        )
        rebuilt.read()
        return rebuilt

    def _timeout(self, deadline: float, what: str) -> httpx.Timeout:
        """The client's timeouts, none longer than what is left of the deadline: a server that
        stalls mid-response is dropped at the deadline, not a read timeout later."""
        left = deadline - self._monotonic()
        if left <= 0:
            raise FetchFailed(f"{what}: not finished within {self.deadline_s} s")
        t = self._client.timeout
        cap = lambda v: left if v is None else min(v, left)  # noqa: E731
        return httpx.Timeout(
            connect=cap(t.connect), read=cap(t.read), write=cap(t.write), pool=cap(t.pool)
        )

    def _failure(self, what: str, error: httpx.HTTPError, deadline: float) -> DriverError:
        if self.proxy is not None and isinstance(error, PROXY_ERRORS):
            # Through a proxy, no answer at all is the proxy's failure (a site that is only
            # slow answers within the deadline through another proxy).
            detail = f"{type(error).__name__}: {str(error).strip()[:200]}"
            return self.proxy.failed(
                ProxyFailed(f"{what} through proxy {self.proxy.name} failed: {detail}")
            )
        if isinstance(error, httpx.TimeoutException) and self._monotonic() >= deadline - 0.05:
            return FetchFailed(f"{what}: not finished within {self.deadline_s} s")
        # The reason, not only the kind: a connection the rebinding check refused says which
        # address and why; a refused or reset connection says so.
        detail = str(error).strip()[:300]
        return FetchFailed(
            f"{what} failed: {type(error).__name__}" + (f": {detail}" if detail else "")
        )

    @contextlib.contextmanager
    def paced(self, url: str) -> Iterator[PageLoad]:
        """Hold one request's place on `url`'s host for a request sent by other means (a
        browser's top-level navigation): the same robots.txt rules, pacer, limits and sign of
        progress as a request sent here. Returns at its start time (or raises `HostNotReady`,
        `RobotsDisallowed`). The caller notes the answer's status on the `PageLoad` it is
        given: a 429 or 503 then blocks the host for every worker, as an HTTP answer does."""
        if self.on_request is not None:
            self.on_request()
        if self.robots is not None and not self.robots.allowed(
            url, self.user_agent, self._fetch_robots
        ):
            raise RobotsDisallowed(f"robots.txt disallows {redact(url)}")
        key = self._pacing_key(url)
        load = PageLoad()
        with self._slot(key):
            self._count_request()
            yield load
        if self.pacer is not None and load.status:
            self.pacer.observe(key, load.status, None)

    def _fetch_robots(self, url: str) -> tuple[int, str]:
        """For the robots cache: GET a robots.txt (checked, paced, never with credentials),
        following up to five redirects as RFC 9309 asks, each hop checked; more than five
        means "unavailable", which RFC 9309 treats as a 4xx."""
        deadline = self._monotonic() + self.deadline_s
        for _hop in range(MAX_REDIRECTS + 1):
            if self.on_request is not None:
                self.on_request()
            self._check(url)
            headers = {"User-Agent": self.user_agent}
            response = self._read("GET", url, headers, None, None, None, deadline)
            if not response.is_redirect:
                return response.status_code, response.text
            url = str(response.url.join(response.headers.get("location", "")))
        return 404, ""

    def _pacing_key(self, url: str) -> str:
        """The key the pacer paces `url` under; its origin without a pacer, or when its name
        does not resolve (grouping by address): the request then fails on its own."""
        if self.pacer is not None:
            try:
                return self.pacer.key_of(url)
            except OSError:
                pass
        return host_key(url)

    @contextlib.contextmanager
    def _slot(self, key: str) -> Iterator[None]:
        if self.pacer is None:
            yield
            return
        with self.pacer.slot(key, self.host_policy):
            yield

"""PoliteHttp: the HTTP client a driver gets for one batch.

Every request, and every redirect hop, goes only to a target `targets.check_target` allows;
the account's credential (a bearer header, the session cookies of its login) goes only to its
media's declared hosts; robots.txt is honoured and each host is paced (`Politeness`). A
response is read within a byte budget and a deadline, so a 50 MB page or a server that never
finishes sending ends that job with a reason instead of holding the worker.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Mapping
from typing import Any, Protocol
from urllib.parse import urlsplit

import httpx

from crawlsched.drivers.base import Account, DriverError
from crawlsched.drivers.targets import check_target, may_carry_secret, redact
from crawlsched.errors import UnsafeTarget

MAX_REDIRECTS = 5
DEFAULT_MAX_BYTES = 5_000_000
DEFAULT_DEADLINE_S = 30.0
USER_AGENT = "crawlsched/1"


class Refused(DriverError):
    """The URL (or a redirect hop) is not a target crawls may reach."""


class RobotsDisallowed(DriverError):
    """The site's robots.txt disallows this URL for our user agent."""


class FetchFailed(DriverError):
    """The request failed: connection, timeout, too large, too slow, too many redirects."""


class Pacer(Protocol):
    def slot(self, host: str) -> contextlib.AbstractContextManager[None]: ...


class Robots(Protocol):
    def allowed(self, url: str, user_agent: str, fetch: Any) -> bool: ...


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
    ) -> None:
        self._client = client
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
        deadline = time.monotonic() + self.deadline_s
        for _hop in range(MAX_REDIRECTS + 1):
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
            response = self._read(method, url, request_headers, cookies, data, json, deadline)
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
    ) -> httpx.Response:
        host = urlsplit(url).hostname or ""
        with self._slot(host):
            self.requests += 1
            try:
                request = self._client.build_request(
                    method, url, headers=headers, cookies=cookies, data=data, json=json
                )
                response = self._client.send(request, stream=True, follow_redirects=False)
            except httpx.HTTPError as e:
                raise FetchFailed(f"{method} {redact(url)} failed: {type(e).__name__}") from None
            try:
                body = bytearray()
                for chunk in response.iter_raw():
                    body.extend(chunk)
                    if len(body) > self.max_bytes:
                        raise FetchFailed(
                            f"{method} {redact(url)}: larger than {self.max_bytes} bytes"
                        )
                    if time.monotonic() > deadline:
                        raise FetchFailed(
                            f"{method} {redact(url)}: not finished within {self.deadline_s} s"
                        )
            except httpx.HTTPError as e:
                raise FetchFailed(f"{method} {redact(url)} failed: {type(e).__name__}") from None
            finally:
                response.close()
        # Rebuilt from the bounded raw body: httpx undoes its Content-Encoding when read, and
        # `.text` decodes with replacement, so a broken encoding is not an error.
        rebuilt = httpx.Response(
            response.status_code,
            headers=response.headers,
            content=bytes(body),
            request=response.request,
        )
        rebuilt.read()
        return rebuilt

    def _fetch_robots(self, url: str) -> tuple[int, str]:
        """For the robots cache: GET a robots.txt (checked, paced, never with credentials)."""
        self._check(url)
        response = self._read(
            "GET",
            url,
            {"User-Agent": self.user_agent},
            None,
            None,
            None,
            time.monotonic() + self.deadline_s,
        )
        return response.status_code, response.text

    @contextlib.contextmanager
    def _slot(self, host: str) -> Iterator[None]:
        if self.pacer is None:
            yield
            return
        with self.pacer.slot(host):
            yield

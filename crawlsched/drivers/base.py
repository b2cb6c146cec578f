"""The driver interface: one job in, found items and discovered URLs out."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

import httpx


class DriverError(Exception):
    """The crawl of one job failed; the job is retried later (it does not fail the batch)."""


@dataclass(frozen=True)
class CrawlJob:
    job_id: Any
    target: str
    url: str
    task: str
    media_name: str
    crawl_limit: int
    # The whole job document as stored: jobs of the old system carry their own fields.
    document: Mapping[str, Any] = field(default_factory=dict)


class CrawlContext:
    """What a driver may use for the jobs of one batch.

    `browser` is the batch's WebDriver session on its leased Selenium node. It is opened the
    first time a driver asks for it (then kept for the rest of the batch and quit at its end),
    so a driver that needs no browser never starts one. `http` may likewise be given as
    `open_http`, called the first time a driver asks: the process's shared client is built
    (and httpx's transport imported) only by a worker whose drivers make requests.
    """

    def __init__(
        self,
        http: httpx.Client | None = None,
        secret: str | None = None,
        selenium_url: str | None = None,
        browser: Any = None,
        open_browser: Callable[[], Any] | None = None,
        secret_hosts: Sequence[str] = (),
        allowed_networks: Sequence[Any] = (),
        open_http: Callable[[], httpx.Client] | None = None,
    ) -> None:
        self._http = http
        self._open_http = open_http
        # Where the secret may go (its media's declared hosts), and the private networks a
        # crawl may reach (settings): see crawlsched.drivers.targets.
        self.secret_hosts = tuple(secret_hosts)
        self.allowed_networks = tuple(allowed_networks)
        self.secret = secret  # the leased account's credential; never log it
        self.selenium_url = selenium_url  # the leased node, when the task needs a browser
        self._browser = browser
        self._open_browser = open_browser

    @property
    def http(self) -> httpx.Client:
        if self._http is None and self._open_http is not None:
            self._http = self._open_http()
        return self._http

    @property
    def browser(self) -> Any:
        if self._browser is None and self._open_browser is not None:
            self._browser = self._open_browser()
        return self._browser

    @property
    def browser_opened(self) -> bool:
        return self._browser is not None


@dataclass
class CrawlResult:
    # Each item has a natural "key" (e.g. its URL); stored by (model, key) so re-crawls update.
    items: list[dict[str, Any]] = field(default_factory=list)
    discovered: list[str] = field(default_factory=list)


class Driver(Protocol):
    def crawl(self, job: CrawlJob, context: CrawlContext) -> CrawlResult: ...


class LoginRejected(DriverError):
    """The site refused the leased account's login: the account is banned until re-enabled.

    The batch stops and its remaining jobs wait for another account; they have not failed.
    """


class RateLimited(DriverError):
    """The site rate-limited the leased account until `until` (an aware datetime).

    The account cools down until then; the batch's remaining jobs wait for another account.
    """

    def __init__(self, until: datetime, message: str = "rate-limited") -> None:
        super().__init__(f"{message} until {until.isoformat()}")
        self.until = until

"""What a driver may use while it crawls the jobs of one batch.

One context per batch: the HTTP client (`http`, per-host politeness and robots.txt, every hop
checked), the batch's browser session on its leased node (`browser`, opened on first use), the
leased account (`account`, and `login` to log in once per batch), `crawl_limit`, and the
three ways to give back what a job found: `save(model, docs)`, `discover(url, task)` and
`is_new(model, key)` before an expensive fetch. The crawl flow calls `begin(job)` before each
job and reads what the job saved and discovered afterwards.
"""

from __future__ import annotations

import copy
import re
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import urldefrag, urlsplit

from crawlsched.drivers import job_bounds
from crawlsched.drivers.base import Account, CrawlJob
from crawlsched.drivers.targets import check_literal
from crawlsched.errors import UnsafeTarget

T = TypeVar("T")

# Fields a discovery may set on its child job: small scalars only (they go into a job document
# that the planner and the crawl read back).
MAX_DISCOVERY_FIELDS = 8
MAX_URL_CHARS = 2000
FIELD_NAME = re.compile(r"^[a-z][a-z0-9_]{0,31}$")
# Job fields the scheduler itself reads or writes: a discovery may not set them.
RESERVED_FIELDS = frozenset(
    {
        "url", "task", "media_name", "media_name_id", "state", "enabled", "execution_date",
        "attempt_count", "modified_at", "created_at", "run_id", "scope_run", "found_by",
        "parent_job", "depth", "site", "released", "released_at", "dispatch_id",
        "lease_deadline", "last_outcome", "last_dispatch_id", "last_error", "last_discovered",
        "last_items", "last_cut", "exhausted", "problem", "target", "interval_s",
        "human_validation", "certitude", "max_depth", "max_pages", "seed_job",
    }
)  # fmt: skip


@dataclass(frozen=True)
class CrawlBounds:
    """How far a run may grow by discovery (per media; defaults from settings)."""

    max_depth: int = 3
    max_pages: int = 10_000
    follow_offsite: bool = False
    extra_hosts: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.max_depth < 0:
            raise ValueError(f"max_depth must be >= 0, got {self.max_depth}")
        if self.max_pages < 0:
            raise ValueError(f"max_pages must be >= 0, got {self.max_pages}")


@dataclass(frozen=True)
class Discovery:
    """A URL a job found, to become a child job of the same run at depth parent + 1."""

    url: str
    task: str
    depth: int
    site: str
    fields: Mapping[str, Any] = field(default_factory=dict)
    # The discovering job's own bounds and its planned job (`crawlsched.drivers.job_bounds`).
    handed_down: Mapping[str, Any] = field(default_factory=dict)


def site_of(url: str) -> str:
    """The host a crawl stays on: the URL's host name, lower case, without a leading `www.`."""
    host = (urlsplit(url).hostname or "").lower()
    return host.removeprefix("www.")


def normalize_url(url: str, base: str | None = None) -> str | None:
    """An absolute http(s) URL without its fragment, or None when it is not one."""
    from urllib.parse import urljoin

    text = url.strip()
    if base:
        text = urljoin(base, text)
    text = urldefrag(text).url
    if not text.startswith(("http://", "https://")) or len(text) > MAX_URL_CHARS:
        return None
    return text


class CrawlContext:
    """See the module docstring. Drivers use the public attributes and methods only."""

    def __init__(
        self,
        *,
        http: Any = None,
        open_http: Callable[[], Any] | None = None,
        browser: Any = None,
        open_browser: Callable[[], Any] | None = None,
        account: Account | None = None,
        secret_hosts: Iterable[str] = (),
        allowed_networks: Iterable[Any] = (),
        crawl_limit: int = 100,
        bounds: CrawlBounds | None = None,
        tasks: Iterable[str] | None = None,
        is_new: Callable[[str, str], bool] | None = None,
        session_kept: bool = False,
    ) -> None:
        self._http = http
        self._open_http = open_http
        self._browser = browser
        self._open_browser = open_browser
        self.account = account
        # Where the account's credential and session may go (its media's declared hosts), and
        # the private networks a crawl may reach (settings): see crawlsched.drivers.targets.
        self.secret_hosts = tuple(secret_hosts)
        self.allowed_networks = tuple(allowed_networks)
        self.crawl_limit = crawl_limit
        self.bounds = bounds or CrawlBounds()
        self._tasks = frozenset(tasks) if tasks is not None else None
        self._is_new = is_new
        self.selenium_url: str | None = None
        self.state: dict[str, Any] = {}  # the driver's scratch space for this batch
        self._login_lock = threading.Lock()
        # A session kept from an earlier batch of the account counts as logged in: the login
        # is done once per session age, not once per batch (`crawl.identity`).
        self.session_kept = session_kept
        self._logged_in = session_kept
        self.logins = 0  # logins run in this batch
        self._login_result: Any = None
        self.job: CrawlJob | None = None
        self.begin(None)

    # -- resources ---------------------------------------------------------------------------

    @property
    def secret(self) -> str | None:
        return self.account.secret if self.account else None

    @property
    def http(self) -> Any:
        """The batch's polite HTTP client (`crawlsched.drivers.fetching.PoliteHttp`)."""
        if self._http is None and self._open_http is not None:
            self._http = self._open_http()
        return self._http

    @property
    def browser(self) -> Any:
        """The batch's WebDriver session on its leased node: opened on first use, kept for the
        rest of the batch, quit at its end. None when the batch leased no node."""
        if self._browser is None and self._open_browser is not None:
            self._browser = self._open_browser()
        return self._browser

    @property
    def opened_http(self) -> Any:
        """The batch's HTTP client if a job opened it, else None (it is not opened here)."""
        return self._http

    @property
    def browser_opened(self) -> bool:
        return self._browser is not None

    def login(self, log_in: Callable[[CrawlContext], T]) -> T:
        """Run `log_in(context)` once per batch and return its result every time: the account
        logs in on the first job that needs it and reuses the session for the rest."""
        with self._login_lock:
            if not self._logged_in:
                self._login_result = log_in(self)
                self._logged_in = True
                self.logins += 1
            return self._login_result

    def login_again(self, log_in: Callable[[CrawlContext], T]) -> bool:
        """The site no longer accepts a session kept from an earlier batch: forget it and log
        in now. False (nothing done) when this batch's session is its own fresh login: then
        the site's refusal is the page's, not an expired session's."""
        with self._login_lock:
            if not self.session_kept:
                return False
            self.session_kept = False
            if self._http is not None and hasattr(self._http, "session"):
                self._http.session.clear()
            self._login_result = log_in(self)
            self._logged_in = True
            self.logins += 1
            return True

    # -- what a job found --------------------------------------------------------------------

    def begin(self, job: CrawlJob | None) -> None:
        """Start a job: what it saves and discovers is collected afresh."""
        self.job = job
        self.saved: dict[str, list[dict[str, Any]]] = {}
        self.discovered: dict[tuple[str, str], Discovery] = {}
        self.cut: Counter[str] = Counter()  # discoveries a bound refused, by bound

    def fork(self, job: CrawlJob) -> CrawlContext:
        """A context for `job` crawled at once with others of the batch: the batch's HTTP
        client, bounds and scratch space, and its own record of what the job finds."""
        if self._open_browser is not None or self.account is not None:
            raise RuntimeError("a batch with a browser or an account crawls one job at a time")
        _ = self.http  # opened once here and shared, not once per fork
        twin = copy.copy(self)
        twin.begin(job)
        return twin

    def save(self, model: str, docs: Iterable[Mapping[str, Any]]) -> None:
        """Store documents of a data model (`profile`, `publication`, `comment`, `friend`,
        `story`, `article`). Each has a natural `key` (a URL, a post id): a re-crawl updates the
        stored document, and the run counts it new, changed or unchanged."""
        bucket = self.saved.setdefault(model, [])
        for doc in docs:
            key = doc.get("key")
            if not isinstance(key, str) or not key:
                raise ValueError(f"a saved {model} document needs a non-empty string 'key'")
            bucket.append(dict(doc))

    def discover(self, url: str, task: str | None = None, **fields: Any) -> bool:
        """Register a URL found by the current job as a child job of its run (task: the
        current job's by default), at depth + 1. Returns False when a bound of the run refused
        it (too deep, another site, not a crawlable URL); it is counted either way. A URL
        already discovered in this run is crawled once."""
        job = self._current()
        task = task or job.task
        if self._tasks is not None and task not in self._tasks:
            raise ValueError(f"discover: media {job.media_name!r} has no task {task!r}")
        if len(fields) > MAX_DISCOVERY_FIELDS or any(
            not isinstance(v, str | int | float | bool | None)
            or (isinstance(v, str) and len(v) > MAX_URL_CHARS)
            for v in fields.values()
        ):
            raise ValueError("discover: at most 8 fields, each a string, number, bool or None")
        if bad := [n for n in fields if not FIELD_NAME.match(n) or n in RESERVED_FIELDS]:
            raise ValueError(f"discover: field names not allowed: {', '.join(bad)}")
        absolute = normalize_url(url, job.url)
        if absolute is None:
            self.cut["not_http"] += 1
            return False
        try:
            check_literal(absolute, self.allowed_networks)
        except UnsafeTarget:
            self.cut["refused"] += 1
            return False
        depth = job.depth + 1
        own = job_bounds.own_bounds(job.document)
        if depth > own.get("max_depth", self.bounds.max_depth):
            self.cut["depth"] += 1
            return False
        site = str(job.document.get("site") or site_of(job.url))
        if not self._on_site(absolute, site):
            self.cut["offsite"] += 1
            return False
        handed = job_bounds.handed_down(job.document, job.job_id)
        self.discovered.setdefault(
            (task, absolute), Discovery(absolute, task, depth, site, fields, handed)
        )
        return True

    def is_new(self, model: str, key: str) -> bool:
        """Whether no document of `model` with this key is stored yet: ask before an expensive
        follow-up fetch (only new items need one)."""
        return True if self._is_new is None else self._is_new(model, key)

    def _on_site(self, url: str, site: str) -> bool:
        if self.bounds.follow_offsite:
            return True
        target = site_of(url)
        return target == site or target in {h.lower() for h in self.bounds.extra_hosts}

    def _current(self) -> CrawlJob:
        if self.job is None:
            raise RuntimeError("no job is being crawled")
        return self.job

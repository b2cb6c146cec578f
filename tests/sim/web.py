"""The simulated web served to the crawl: `httpx.Client(transport=web.transport)` fetches from it.

A request takes its page's latency on the virtual clock (`world.sleep`: other threads run
meanwhile) and is answered as `web_graph` drew the page. Every request is logged (`web.log`):
virtual start and end, host, path, status, `Retry-After`, and the simulated process and thread
that sent it; a request cut by its process's crash ends then, `aborted`.

Names resolve without loopback: `hN.sim` → 203.0.113.(N+1) (TEST-NET-3, RFC 5737), so the crawl
is told to allow `web.allowed_networks` and nothing else.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta
from email.utils import format_datetime

import httpx

from crawlsched.errors import UnsafeTarget
from tests.sim.web_graph import Page, Reachable, SiteMap, WebSpec, absolute, draw_web
from tests.sim.world import World

ALLOWED_NETWORKS = ("203.0.113.0/24",)


@dataclass
class Request:
    """One request as the web saw it (times in virtual seconds from the world's start)."""

    seq: int
    host: str
    path: str
    start_s: float
    process: str | None
    thread: str | None
    generation: int | None = None  # of the process
    end_s: float | None = None
    end_at: datetime | None = None  # the answer's wall time (a Retry-After date is from it)
    status: int | None = None
    retry_after: str | None = None
    aborted: bool = False

    @property
    def url(self) -> str:
        return f"http://{self.host}{self.path}"


class SimTransport(httpx.BaseTransport):
    def __init__(self, web: SimWeb) -> None:
        self._web = web

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        return self._web.handle(request)


class SimWeb:
    def __init__(self, world: World, seed: int, spec: WebSpec | None = None) -> None:
        self.world = world
        self.spec = spec or WebSpec()
        self.site: SiteMap = draw_web(seed, self.spec)
        self.transport = SimTransport(self)
        self.log: list[Request] = []
        self.throttled: Counter[str] = Counter()  # throttled answers so far, by URL
        self.allowed_networks = ALLOWED_NETWORKS

    # -- what the crawl is given ---------------------------------------------------------------

    def seeds(self) -> list[str]:
        return self.site.seeds()

    def resolve(self, host: str, port: int) -> list[str]:
        """`crawlsched.drivers.targets.Resolver` for the simulated names."""
        name = host.lower()
        if name not in self.site.hosts:
            raise UnsafeTarget(f"host {host!r} does not resolve")
        return [f"203.0.113.{int(name[1:].split('.')[0]) + 1}"]

    def crawl_delay(self, host: str) -> int | None:
        return self.site.hosts[host].crawl_delay_s

    def reachable(
        self,
        seeds: list[str],
        max_depth: int,
        same_site: bool = True,
        give_up_after: int | None = None,
    ) -> Reachable:
        return self.site.reachable(seeds, max_depth, same_site, give_up_after)

    # -- serving -------------------------------------------------------------------------------

    def handle(self, request: httpx.Request) -> httpx.Response:
        host, path = request.url.host, request.url.path
        if host not in self.site.hosts:
            raise httpx.ConnectError(f"no such host {host!r}", request=request)
        cur = self.world.current()
        record = Request(
            len(self.log), host, path, self.world.elapsed,
            cur.process.name if cur else None, cur.name if cur else None,
            cur.generation if cur else None,
        )  # fmt: skip
        self.log.append(record)
        url = f"http://{host}{path}"
        page = self.site.page(url)
        try:
            if cur is not None:
                latency = page.latency_s if page else self.spec.latency_s[0]
                self.world.sleep(latency)
            status, headers, body = self._answer(url, page)
        except BaseException:
            record.aborted = True
            raise
        finally:
            record.end_s, record.end_at = self.world.elapsed, self.world.now()
        record.status, record.retry_after = status, headers.get("Retry-After")
        # A stream, as a network transport gives it: `content=` would be read already, and a
        # client that streams the body (PoliteHttp) could not read it again.
        headers["Content-Length"] = str(len(body))
        return httpx.Response(
            status, headers=headers, stream=httpx.ByteStream(body), request=request
        )

    def _answer(self, url: str, page: Page | None) -> tuple[int, dict[str, str], bytes]:
        if url.endswith("/robots.txt"):
            text = self.site.hosts[url.split("/")[2]].robots_txt
            if text is None:
                return 404, {"Content-Type": "text/plain"}, b"not found"
            return 200, {"Content-Type": "text/plain"}, text.encode()
        if page is None or page.kind == "not_found":
            return 404, {"Content-Type": "text/html"}, b"<html><title>not found</title></html>"
        if page.kind == "redirect":
            return page.status, {"Location": page.location or "/"}, b""
        if page.kind == "throttle" and (page.times is None or self.throttled[url] < page.times):
            self.throttled[url] += 1
            headers = {"Content-Type": "text/html"}
            if (value := self._retry_after(page)) is not None:
                headers["Retry-After"] = value
            return page.status, headers, b"<html><title>slow down</title></html>"
        anchors = "".join(f'<a href="{link}">{link}</a>' for link in page.links)
        body = f"<html><title>{url}</title><body>{anchors}</body></html>"
        return 200, {"Content-Type": "text/html; charset=utf-8"}, body.encode()

    def _retry_after(self, page: Page) -> str | None:
        if page.retry_after == "seconds":
            return str(page.retry_after_s)
        if page.retry_after == "http_date":
            # A date has whole seconds: round up, so it never means less than retry_after_s.
            now = self.world.now()
            at = now.replace(microsecond=0) + timedelta(seconds=1 if now.microsecond else 0)
            return format_datetime(at + timedelta(seconds=page.retry_after_s), usegmt=True)
        if page.retry_after == "garbage":
            return "soon"
        return None

    # -- reading the log -----------------------------------------------------------------------

    def fetches(self, url: str) -> list[Request]:
        return [r for r in self.log if r.url == url]

    def links_of(self, url: str) -> list[str]:
        page = self.site.page(url)
        return [absolute(url, link) for link in page.links] if page else []

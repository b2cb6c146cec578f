"""The HTTP driver: fetch the job's URL, keep the page's title and links, report new links."""

from __future__ import annotations

from html.parser import HTMLParser
from urllib.parse import urldefrag, urljoin

import httpx

from crawlsched.drivers.base import CrawlContext, CrawlJob, CrawlResult, DriverError
from crawlsched.drivers.registry import register
from crawlsched.drivers.targets import check_target, may_carry_secret, redact
from crawlsched.errors import UnsafeTarget


class _PageParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.title = ""
        self.links: list[str] = []
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self._in_title = True
        elif tag == "a":
            href = dict(attrs).get("href")
            if href:
                self.links.append(href)

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data


MAX_REDIRECTS = 5


def fetch(url: str, context: CrawlContext) -> httpx.Response:
    """GET with redirects followed by hand: each hop's target is resolved and checked before
    connecting, and the secret goes only to hops whose host the media declares."""
    for _ in range(MAX_REDIRECTS + 1):
        try:
            check_target(url, context.allowed_networks)
        except UnsafeTarget as e:
            raise DriverError(f"refused: {e}") from None
        headers = {}
        if context.secret and may_carry_secret(url, context.secret_hosts):
            headers["Authorization"] = f"Bearer {context.secret}"
        try:
            response = context.http.get(url, headers=headers, follow_redirects=False)
        except httpx.HTTPError as e:
            raise DriverError(f"GET {redact(url)} failed: {type(e).__name__}") from None
        if not response.is_redirect:
            return response
        url = str(response.url.join(response.headers["location"]))
    raise DriverError(f"GET {redact(url)}: more than {MAX_REDIRECTS} redirects")


class HttpPageDriver:
    def crawl(self, job: CrawlJob, context: CrawlContext) -> CrawlResult:
        response = fetch(job.url, context)
        if response.status_code >= 400:
            raise DriverError(f"GET {redact(job.url)} answered {response.status_code}")
        parser = _PageParser()
        parser.feed(response.text)
        seen: dict[str, None] = {}
        for href in parser.links:
            absolute = urldefrag(urljoin(str(response.url), href)).url
            if absolute.startswith(("http://", "https://")):
                seen.setdefault(absolute)
        links = list(seen)[: job.crawl_limit]
        page = {
            "key": str(response.url),
            "url": str(response.url),
            "status": response.status_code,
            "title": parser.title.strip(),
            "links": links,
            "bytes": len(response.content),
        }
        return CrawlResult(items=[page], discovered=links)


register("http", HttpPageDriver)

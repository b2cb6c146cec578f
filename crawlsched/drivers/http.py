"""The HTTP driver: fetch the job's URL, keep the page's title and links, report new links."""

from __future__ import annotations

from html.parser import HTMLParser
from urllib.parse import urldefrag, urljoin

import httpx

from crawlsched.drivers.base import CrawlContext, CrawlJob, CrawlResult, DriverError
from crawlsched.drivers.registry import register


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


class HttpPageDriver:
    def crawl(self, job: CrawlJob, context: CrawlContext) -> CrawlResult:
        headers = {"Authorization": f"Bearer {context.secret}"} if context.secret else {}
        try:
            response = context.http.get(job.url, headers=headers, follow_redirects=True)
        except httpx.HTTPError as e:
            raise DriverError(f"GET {job.url} failed: {type(e).__name__}: {e}") from e
        if response.status_code >= 400:
            raise DriverError(f"GET {job.url} answered {response.status_code}")
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

"""The generic page driver: fetch the job's URL, keep its title and links, discover the links.

Serves any task (it defines `crawl`): one page per job, saved under the task's model, and every
link on it discovered as a job of the same task, so a site is crawled page by page within the
run's bounds. A redirect is not followed but discovered, as Scrapy's duplicate filter sees a
redirect's target: a page reached both by a link and by a redirect is fetched once per run.
Pages are read with parsel, as Scrapy does.
"""

from __future__ import annotations

from parsel import Selector

from crawlsched.catalog import TASK_RESULTS
from crawlsched.drivers.base import CrawlJob, DriverError, HttpStatusError
from crawlsched.drivers.context import CrawlContext, normalize_url
from crawlsched.drivers.targets import redact

HTML_TYPES = ("text/html", "application/xhtml+xml")


def page_links(selector: Selector, base: str, limit: int) -> list[str]:
    """Absolute http(s) links of a page, first occurrence first, at most `limit`."""
    seen: dict[str, None] = {}
    for href in selector.css("a::attr(href)").getall():
        absolute = normalize_url(href, base)
        if absolute is not None:
            seen.setdefault(absolute)
        if len(seen) >= limit:
            break
    return list(seen)


def html_of(response, url: str) -> Selector:
    """The page as a parsel Selector, or DriverError for an error status or a non-HTML body."""
    if response.status_code >= 400:
        status = response.status_code
        raise HttpStatusError(f"GET {redact(url)} answered {status}", status)
    content_type = response.headers.get("content-type", "text/html").split(";")[0].strip()
    if content_type.lower() not in HTML_TYPES:
        raise DriverError(f"GET {redact(url)}: not HTML ({content_type[:60]})")
    return Selector(text=response.text)


class HttpPageDriver:
    jobs_at_once = True  # stateless, and only `context.http` reaches the network

    def crawl(self, job: CrawlJob, context: CrawlContext) -> None:
        response = context.http.get(job.url, follow_redirects=False)
        if response.is_redirect:
            context.discover(str(response.url.join(response.headers.get("location", ""))))
            return
        page = html_of(response, job.url)
        url = str(response.url)
        links = page_links(page, url, job.crawl_limit)
        context.save(
            TASK_RESULTS[job.task].model,
            [
                {
                    "key": url,
                    "url": url,
                    "status": response.status_code,
                    "title": (page.css("title::text").get() or "").strip(),
                    "links": links,
                    "bytes": len(response.content),
                }
            ],
        )
        for link in links:
            context.discover(link)

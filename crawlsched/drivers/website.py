"""The website driver: list pages, articles and their comments, with either pagination style.

What a job is, is read from its document (a seed job's fields, or the fields its discoverer
gave it):
- `page`: `list` (the default: a seed is a section's first list page), `article`;
- `pagination`: `next_link` (follow `<a rel="next">`, or the CSS `next_selector`) or
  `page_param` (`?<page_param>=N`, default `page`, from 1; a list page with no article ends it);
- `article_selector`: CSS of the article links on a list page (default `article a[href]`).

Task `article`: a list page discovers its articles and the next list page; an article page is
stored (model `article`, key: its canonical URL) and discovers its comments when it has any.
Task `comment`: stores the comments of one comments page (model `comment`, key: article URL +
`#` + comment id) and discovers the next comments page. Over plain HTTP, or through the batch's
browser when the media needs Selenium (the batch then has one).
"""

from __future__ import annotations

from urllib.parse import parse_qs, urlencode, urlsplit, urlunsplit

from parsel import Selector

from crawlsched.drivers.base import CrawlJob, DriverError
from crawlsched.drivers.browser_session import navigate, raise_if_error_page
from crawlsched.drivers.context import CrawlContext, normalize_url
from crawlsched.drivers.http import html_of
from crawlsched.drivers.targets import check_target
from crawlsched.errors import UnsafeTarget

DEFAULT_ARTICLE_SELECTOR = "article a[href]"
# Fields a list page passes on to the pages it discovers.
CARRIED = ("pagination", "page_param", "article_selector", "next_selector")


def _load(url: str, context: CrawlContext) -> tuple[str, Selector]:
    """(final URL, page): through the batch's browser when it has one, else plain HTTP."""
    browser = context.browser
    if browser is None:
        response = context.http.get(url)
        return str(response.url), html_of(response, url)
    try:
        check_target(url, context.allowed_networks)
    except UnsafeTarget as e:
        raise DriverError(f"refused: {e}") from None
    navigate(browser, url, context.http)
    raise_if_error_page(browser)
    return str(browser.current_url), Selector(text=browser.page_source)


def with_page(url: str, param: str, number: int) -> str:
    parts = urlsplit(url)
    query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    query[param] = str(number)
    return urlunsplit((*parts[:3], urlencode(query), ""))


class WebsiteDriver:
    jobs_at_once = True  # stateless, and only `context.http` reaches the network

    def article(self, job: CrawlJob, context: CrawlContext) -> None:
        doc = job.document
        if doc.get("page") == "article":
            self._article_page(job, context)
        else:
            self._list_page(job, context)

    def _list_page(self, job: CrawlJob, context: CrawlContext) -> None:
        doc = job.document
        url, page = _load(job.url, context)
        carried = {k: doc[k] for k in CARRIED if isinstance(doc.get(k), str)}
        selector = carried.get("article_selector", DEFAULT_ARTICLE_SELECTOR)
        links = [normalize_url(h, url) for h in page.css(f"{selector}::attr(href)").getall()]
        articles = list(dict.fromkeys(link for link in links if link))[: job.crawl_limit]
        for link in articles:
            context.discover(link, "article", page="article", **carried)
        if carried.get("pagination") == "page_param":
            if not articles:
                return  # past the last page
            param = carried.get("page_param", "page")
            number = doc.get("page_no") if isinstance(doc.get("page_no"), int) else 1
            nxt = with_page(url, param, number + 1)
            context.discover(nxt, "article", page="list", page_no=number + 1, **carried)
            return
        next_css = carried.get("next_selector", 'a[rel="next"]')
        href = page.css(f"{next_css}::attr(href)").get()
        if href and (nxt := normalize_url(href, url)):
            context.discover(nxt, "article", page="list", **carried)

    def _article_page(self, job: CrawlJob, context: CrawlContext) -> None:
        url, page = _load(job.url, context)
        key = normalize_url(page.css('link[rel="canonical"]::attr(href)').get() or url, url)
        body = " ".join(t.strip() for t in page.css(".body ::text, article p::text").getall())
        count = page.css(".body::attr(data-comment-count)").get()
        context.save(
            "article",
            [
                {
                    "key": key or url,
                    "url": url,
                    "title": (
                        page.css("h1::text").get() or page.css("title::text").get() or ""
                    ).strip(),
                    "author": (page.css(".author::text").get() or "").strip(),
                    "date": page.css("time::attr(datetime)").get(),
                    "body": body.strip(),
                    "comment_count": int(count) if count and count.isdigit() else None,
                }
            ],
        )
        href = page.css("a.comments::attr(href)").get()
        if href and (comments := normalize_url(href, url)):
            context.discover(comments, "comment", article=key or url)

    def comment(self, job: CrawlJob, context: CrawlContext) -> None:
        url, page = _load(job.url, context)
        article = job.document.get("article") or url
        docs = []
        for item in page.css("li.comment")[: job.crawl_limit]:
            comment_id = item.attrib.get("data-id")
            if not comment_id:
                continue
            docs.append(
                {
                    "key": f"{article}#{comment_id}",
                    "article": article,
                    "id": comment_id,
                    "author": (item.css(".author::text").get() or "").strip(),
                    "text": (item.css(".text::text").get() or "").strip(),
                }
            )
        context.save("comment", docs)
        href = page.css('a[rel="next"]::attr(href)').get()
        if href and (nxt := normalize_url(href, url)):
            context.discover(nxt, "comment", article=article)

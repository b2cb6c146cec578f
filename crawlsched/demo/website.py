"""A generated news site served on 127.0.0.1 for the demo, the tests and bench_crawl.

Two sections, one per pagination style a site uses: `news` links its list pages with
`<a rel="next">` (`next_link`), `blog` numbers them with `?page=N` (`page_param`; a page past
the last lists nothing). Each article has a page and paginated comments. `data` is exactly what
the site serves, so a test can compare what a crawl stored with it.
"""

from __future__ import annotations

import html
import threading
from collections import Counter
from dataclasses import dataclass, field
from urllib.parse import parse_qs, urlsplit

from crawlsched.demo.serving import LocalSite, QuietHandler

SECTIONS = {"news": "next_link", "blog": "page_param"}


@dataclass
class SiteData:
    articles: dict[str, dict] = field(default_factory=dict)  # path -> article fields
    comments: dict[str, list[dict]] = field(default_factory=dict)  # article path -> comments
    lists: dict[str, list[str]] = field(default_factory=dict)  # section -> article paths


def generate(articles: int, comments: int) -> SiteData:
    data = SiteData()
    for section in SECTIONS:
        data.lists[section] = []
        for i in range(articles):
            path = f"/{section}/a/{i}"
            data.lists[section].append(path)
            n = (i * 5 + 3) % (comments + 1)  # 0 to `comments`, varied
            data.articles[path] = {
                "title": f"{section.title()} story {i}",
                "author": f"writer{i % 4}",
                "date": f"2026-11-{1 + i % 28:02d}",
                "body": " ".join([f"Body of {section} story {i}."] * 3),
                "comment_count": n,
            }
            data.comments[path] = [
                {"id": f"c{j}", "author": f"reader{(i + j) % 5}", "text": f"comment {j} on {i}"}
                for j in range(n)
            ]
    return data


def _page(title: str, body: str) -> bytes:
    return (
        f"<html><head><title>{html.escape(title)}</title></head><body>{body}</body></html>".encode()
    )


class DemoWebsite(LocalSite):
    """`with DemoWebsite() as site:` serves on a loopback port (daemon threads; `port` 0: an
    ephemeral one)."""

    def __init__(
        self,
        articles: int = 7,
        per_page: int = 3,
        comments: int = 6,
        per_comment_page: int = 4,
        port: int = 0,
    ):
        self.data = generate(articles, comments)
        self.per_page = per_page
        self.per_comment_page = per_comment_page
        self.fetches: Counter[str] = Counter()
        self._lock = threading.Lock()
        site = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                with site._lock:
                    site.fetches[self.path] += 1
                status, body = site.render(self.path)
                self.send_response(status)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        super().__init__(Handler, port=port)

    def render(self, raw_path: str) -> tuple[int, bytes]:
        parts = urlsplit(raw_path)
        page = _int(parse_qs(parts.query).get("page", ["1"])[0])
        segments = [s for s in parts.path.split("/") if s]
        if len(segments) == 1 and segments[0] in SECTIONS:
            return self._list(segments[0], page)
        if len(segments) == 3 and segments[:2] == ["news", "list"]:
            return self._list("news", _int(segments[2]))
        path = "/" + "/".join(segments[:3])
        if path in self.data.articles and len(segments) == 3:
            return 200, self._article(path)
        if path in self.data.articles and segments[3:] == ["comments"]:
            return self._comments(path, page)
        return 404, _page("not found", "<p>no such page</p>")

    def _list(self, section: str, page: int) -> tuple[int, bytes]:
        paths = self.data.lists[section]
        start = (page - 1) * self.per_page
        if page < 1 or (start >= len(paths) and SECTIONS[section] == "next_link"):
            return 404, _page("not found", "")
        shown = paths[start : start + self.per_page]
        items = "".join(
            f'<article><a href="{p}">{html.escape(self.data.articles[p]["title"])}</a></article>'
            for p in shown
        )
        nav = ""
        if SECTIONS[section] == "next_link" and start + self.per_page < len(paths):
            nav = f'<a rel="next" href="/news/list/{page + 1}">older</a>'
        return 200, _page(f"{section} page {page}", f"<main>{items}</main>{nav}")

    def _article(self, path: str) -> bytes:
        a = self.data.articles[path]
        comments = (
            f'<a class="comments" href="{path}/comments">{a["comment_count"]} comments</a>'
            if a["comment_count"]
            else ""
        )
        return _page(
            a["title"],
            f'<h1>{html.escape(a["title"])}</h1><span class="author">{a["author"]}</span>'
            f'<time datetime="{a["date"]}">{a["date"]}</time>'
            f'<div class="body" data-comment-count="{a["comment_count"]}">'
            f"<p>{html.escape(a['body'])}</p></div>{comments}",
        )

    def _comments(self, path: str, page: int) -> tuple[int, bytes]:
        all_comments = self.data.comments[path]
        start = (page - 1) * self.per_comment_page
        if page < 1 or start >= max(len(all_comments), 1):
            return 404, _page("not found", "")
        items = "".join(
            f'<li class="comment" data-id="{c["id"]}"><span class="author">{c["author"]}</span>'
            f'<p class="text">{html.escape(c["text"])}</p></li>'
            for c in all_comments[start : start + self.per_comment_page]
        )
        nav = ""
        if start + self.per_comment_page < len(all_comments):
            nav = f'<a rel="next" href="{path}/comments?page={page + 1}">more</a>'
        return 200, _page("comments", f'<ul class="comments">{items}</ul>{nav}')


def _int(text: str) -> int:
    return int(text) if text.isdigit() and len(text) < 7 else 0

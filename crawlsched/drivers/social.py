"""The demo social network's driver: the five profile tasks, and the worked example of
docs/drivers.md.

A job's URL is the profile page (`<site>/u/<handle>`). Pages behind the login are read with the
leased account's session: the account logs in on the first page that needs it
(`context.login`), through `http.form_login`, which only posts to an origin the media
declares, unless the batch goes on with the account's session kept from an earlier batch; a
kept session the site no longer accepts (401) is replaced by one new login
(`context.login_again`). A refused login, or a page saying the account is suspended, raises
`LoginRejected` (the account is banned, the batch's other jobs wait for another account). A 429
with `x-rate-limit-reset` limits one endpoint: `RateLimited` for this task only until then;
a 429 without it limits the account: it cools until `Retry-After`. Either way the batch waits.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from urllib.parse import urlsplit

import httpx
from parsel import Selector

from crawlsched.drivers.base import (
    CrawlJob,
    DriverError,
    HttpStatusError,
    LoginRejected,
    RateLimited,
)
from crawlsched.drivers.browser_session import navigate, raise_if_error_page
from crawlsched.drivers.context import CrawlContext, normalize_url
from crawlsched.drivers.targets import check_target, redact
from crawlsched.errors import UnsafeTarget

LISTS = ("followers", "followings")
STORIES_WAIT_S = 10
READY_SCRIPT = "return document.getElementById('stories')?.dataset.ready"


def _site(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def _handle(job: CrawlJob) -> str:
    """The profile's handle: carried by a discovered page, else read from `/u/<handle>`."""
    if isinstance(job.document.get("handle"), str):
        return job.document["handle"]
    parts = urlsplit(job.url).path.split("/")
    return parts[2] if len(parts) > 2 and parts[1] == "u" else job.target


def _log_in(context: CrawlContext, site: str) -> None:
    if context.account is None:
        raise DriverError("this page needs a login but the batch leased no account")
    response = context.http.form_login(
        f"{site}/login",
        {"username": context.account.username, "password": context.account.secret},
    )
    _check_rate(response)
    if response.status_code == 403:
        raise LoginRejected(f"the site refused the login of {context.account.username}")
    if response.status_code >= 400:
        raise HttpStatusError(f"login answered {response.status_code}", response.status_code)


# The most a site's reset time is believed, from now: a header far in the future would lock a
# task for ever.
MAX_RESET_S = 86400
SUSPENDED = "account suspended"


def _check_rate(response: httpx.Response) -> None:
    if response.status_code != 429:
        return
    now = datetime.now(UTC)
    reset = response.headers.get("x-rate-limit-reset", "")
    if reset.isdigit():
        until = datetime.fromtimestamp(int(reset), UTC)
        until = min(max(until, now), now + timedelta(seconds=MAX_RESET_S))
        raise RateLimited(until, "rate-limited on this endpoint", task_only=True)
    retry = response.headers.get("retry-after", "60")
    seconds = int(retry) if retry.isdigit() else 60
    raise RateLimited(now + timedelta(seconds=min(seconds, MAX_RESET_S)))


def _get(context: CrawlContext, url: str, login: bool = False) -> Selector:
    log_in = lambda ctx: _log_in(ctx, _site(url))  # noqa: E731
    if login:
        context.login(log_in)
    response = context.http.get(url)
    _check_rate(response)
    if response.status_code == 401 and login and context.login_again(log_in):
        response = context.http.get(url)  # the kept session had expired: once more, logged in
        _check_rate(response)
    if response.status_code == 403 and SUSPENDED in response.text:
        name = context.account.username if context.account else "the account"
        raise LoginRejected(f"the site suspended {name}")
    if response.status_code == 401:
        raise DriverError(f"{redact(url)} needs a login")
    if response.status_code >= 400:
        status = response.status_code
        raise HttpStatusError(f"GET {redact(url)} answered {status}", status)
    return Selector(text=response.text)


class DemoSocialDriver:
    def profile(self, job: CrawlJob, context: CrawlContext) -> None:
        page = _get(context, job.url)
        card = page.css("div.profile")
        handle = card.attrib.get("data-handle") or _handle(job)
        number = {
            k: int(card.css(f".{k}::text").get() or 0) for k in ("followers", "followings", "posts")
        }
        doc = {
            "key": handle,
            "handle": handle,
            "name": card.css(".name::text").get(),
            "bio": card.css(".bio::text").get(),
            **number,
        }
        context.save("profile", [doc])

    def publication(self, job: CrawlJob, context: CrawlContext) -> None:
        handle = _handle(job)
        page = _get(context, f"{job.url.rstrip('/')}/posts")
        posts, comments = [], []
        for post in page.css("article.post")[: job.crawl_limit]:
            key = f"{handle}/post/{post.attrib['data-id']}"
            posts.append(
                {
                    "key": key,
                    "handle": handle,
                    "id": post.attrib["data-id"],
                    "text": post.css("p.text::text").get(),
                    "date": post.css("time::attr(datetime)").get(),
                }
            )
            for comment in post.css("li.comment"):
                comments.append(
                    {
                        "key": f"{key}/comment/{comment.attrib['data-id']}",
                        "post": key,
                        "id": comment.attrib["data-id"],
                        "author": comment.css(".author::text").get(),
                        "text": comment.css("p.text::text").get(),
                    }
                )
        context.save("publication", posts)
        context.save("comment", comments)

    def friend(self, job: CrawlJob, context: CrawlContext) -> None:
        """One page of followers or followings; the next page is discovered, so a profile's
        friend crawl is of unknown size. A planned job starts both lists."""
        handle = _handle(job)
        which = job.document.get("list")
        if which in LISTS:
            self._friend_page(job, context, handle, which, job.url)
            return
        for name in LISTS:
            self._friend_page(job, context, handle, name, f"{job.url.rstrip('/')}/{name}")

    def _friend_page(
        self, job: CrawlJob, context: CrawlContext, handle: str, which: str, url: str
    ) -> None:
        page = _get(context, url, login=True)
        others = page.css(f"ul.{which} li.friend a::text").getall()[: job.crawl_limit]
        context.save(
            "friend",
            [
                {"key": f"{handle}:{which}:{o}", "handle": handle, "list": which, "other": o}
                for o in others
            ],
        )
        if (href := page.css('a[rel="next"]::attr(href)').get()) and (
            nxt := normalize_url(href, url)
        ):
            context.discover(nxt, "friend", handle=handle, list=which)

    def profile_replies(self, job: CrawlJob, context: CrawlContext) -> None:
        handle = _handle(job)
        page = _get(context, f"{job.url.rstrip('/')}/replies", login=True)
        context.save(
            "comment",
            [
                {
                    "key": f"{handle}/reply/{r.attrib['data-id']}",
                    "handle": handle,
                    "id": r.attrib["data-id"],
                    "to": r.attrib.get("data-to"),
                    "text": r.css("::text").get(),
                }
                for r in page.css("ul.replies li.reply")[: job.crawl_limit]
            ],
        )

    def stories(self, job: CrawlJob, context: CrawlContext) -> None:
        """Stories are drawn by the page's JavaScript: read them in the batch's browser."""
        browser = context.browser
        if browser is None:
            raise DriverError("stories are rendered by JavaScript: this task needs a browser")
        url = f"{job.url.rstrip('/')}/stories"
        try:
            check_target(url, context.allowed_networks)
        except UnsafeTarget as e:
            raise DriverError(f"refused: {e}") from None
        handle = _handle(job)
        # WebDriver errors propagate: the crawl flow tells a lost session from a page's failure.
        navigate(browser, url, context.http)
        raise_if_error_page(browser)
        deadline = time.monotonic() + STORIES_WAIT_S
        while browser.execute_script(READY_SCRIPT) != "yes":
            if time.monotonic() > deadline:
                raise DriverError(f"{redact(url)}: stories never rendered")
            time.sleep(0.05)
        items = browser.execute_script(
            "return Array.from(document.querySelectorAll('li.story'),"
            " li => [li.dataset.id, li.textContent])"
        )
        context.save(
            "story",
            [
                {"key": f"{handle}/story/{sid}", "handle": handle, "id": sid, "text": text}
                for sid, text in (items or [])[: job.crawl_limit]
            ],
        )

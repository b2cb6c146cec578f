"""What a batch's crawl is set up with: its media checked against the store, the driver's
context (the polite HTTP client, the account, the bounds), and each page's driver call as a
lane runs it (a frozen job in, a frozen `JobDone` out)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from crawlsched.catalog import kind_of_collection
from crawlsched.crawl.identity import Identity
from crawlsched.crawl.pages import Page
from crawlsched.crawl.progress import JobDone
from crawlsched.crawl.resources import DispatchLease, Leases
from crawlsched.drivers.base import Account, CrawlJob, task_method
from crawlsched.drivers.context import CrawlBounds, CrawlContext
from crawlsched.drivers.proxied import restore_cookies
from crawlsched.messages import BadMessage, BatchMessage
from crawlsched.planning.due import derive_target
from crawlsched.politeness.pacer import HostNotReady
from crawlsched.resources.rules import ACCOUNT_POOL
from crawlsched.runtime import Runtime
from crawlsched.store.children import Found
from crawlsched.store.results import Item


def batch_context(
    rt: Runtime,
    message: BatchMessage,
    leases: Leases,
    dispatch: DispatchLease,
    bounds: CrawlBounds,
    identity: Identity | None = None,
) -> CrawlContext:
    """`identity`: the batch's proxy and its account's kept session (`crawl.identity`)."""
    identity = identity or Identity()
    media = rt.media(message.media_name) or {}
    account = None
    if account_lease := leases.of_pool(ACCOUNT_POOL):
        found = rt.leases.credentials(account_lease, rt.now())
        account = Account(*found) if found else None
    secret_hosts = tuple(media.get("secret_hosts") or ())
    model_ids = rt.model_ids()
    tasks = set(kind_of_collection(message.collection).tasks) & set(
        rt.media_tasks(message.media_name)
    )
    kept = identity.kept_session

    def open_http() -> Any:
        http = rt.polite_http(
            account,
            secret_hosts,
            on_request=dispatch.progress,
            politeness=media.get("politeness"),
            proxy=identity.proxy,
        )
        if kept is not None:
            http.session = restore_cookies(kept["cookies"])
        return http

    return CrawlContext(
        open_http=open_http,
        session_kept=kept is not None,
        account=account,
        secret_hosts=secret_hosts,
        allowed_networks=rt.allowed_networks,
        crawl_limit=message.crawl_limit,
        bounds=bounds,
        tasks=tasks,
        is_new=lambda model, key: not rt.results.exists(model, model_ids.get(model), key),
    )


def driver_calls(
    rt: Runtime,
    message: BatchMessage,
    context: CrawlContext,
    leases: Leases,
    dispatch: DispatchLease,
    width: int,
    driver: Any,
) -> Callable[[Page], Callable[[], JobDone]]:
    """Makes each page's driver call, for a lane: what it found comes back frozen."""
    target_fields = ("target", *rt.target_fields(message.collection))

    def start(page: Page) -> Callable[[], JobDone]:
        doc = page.doc
        depth = doc.get("depth") if isinstance(doc.get("depth"), int) else 0
        job = CrawlJob(
            doc["_id"], derive_target(doc, target_fields), page.url, message.task,
            message.media_name, message.crawl_limit, document=doc, depth=depth,
        )  # fmt: skip
        own = context if width == 1 else context.fork(job)
        started = rt.now()

        def call() -> JobDone:
            try:
                own.begin(job)
                leases.keep()
                dispatch.progress()
                task_method(driver, message.task)(job, own)
            except Exception as e:  # the loop decides what it means
                return JobDone(doc, started, browser_opened=own.browser_opened, error=e)
            saved = tuple(Item(job.job_id, m, d) for m, docs in own.saved.items() for d in docs)
            found = tuple(Found(job.job_id, d) for d in own.discovered.values())
            return JobDone(doc, started, saved, found, dict(own.cut), own.browser_opened)

        return call

    return start


def robots_first(context: CrawlContext) -> Callable[[Page], bool]:
    """Reads the robots.txt of a site this process meets for the first time as a step of its
    own (`PoliteHttp.robots_first`): inside the page's request, the thread would sleep the
    host's delay between the two while the batch's other hosts are ready. True when a request
    was sent (the page then waits its host's delay); `HostNotReady` when the host is not
    ready. A URL the client refuses is left to the page's own request, which fails as the
    page's."""

    def first(page: Page) -> bool:
        http = context.http
        if http is None or not hasattr(http, "robots_first"):
            return False
        try:
            return bool(http.robots_first(page.url))
        except HostNotReady:
            raise
        except Exception:
            return False

    return first


def disagreement(
    message: BatchMessage,
    media: dict[str, Any] | None,
    jobs: list[dict],
    task_row: dict[str, Any] | None = None,
) -> str | None:
    """Why the batch's message disagrees with the store (its media row, its task row and its
    jobs), or None.

    The crawl runs the store's driver for the store's media: a message that names another
    driver, another media id, or jobs of another media is refused, so whoever can publish a
    crawl message cannot pick the code that runs or the media a job is crawled as. Nor can it
    say a task needs no account or no browser when the store says it does, or raise the
    task's crawl limit."""
    if media is None:
        return f"no media named {message.media_name!r} in the store"
    if task_row is None:
        return f"media {message.media_name!r} has no task {message.task[:40]!r} in the store"
    needs = (bool(task_row.get("need_login")), bool(task_row.get("need_selenium")))
    if needs != (message.need_login, message.need_selenium):
        return (
            f"task {message.task!r} of {message.media_name!r} needs login={needs[0]}, "
            f"selenium={needs[1]} in the store, not login={message.need_login}, "
            f"selenium={message.need_selenium}"
        )
    if bool(media.get("proxy")) != message.need_proxy:
        return (
            f"media {message.media_name!r} goes out through "
            f"{'proxies' if media.get('proxy') else 'no proxy'} in the store, not "
            f"need_proxy={message.need_proxy}"
        )
    if message.crawl_limit > int(task_row.get("crawl_limit") or 0):
        return (
            f"crawl limit {message.crawl_limit} is over the store's "
            f"{task_row.get('crawl_limit')} for task {message.task!r} of {message.media_name!r}"
        )
    if media.get("media_name_id", media.get("_id")) != message.media_id:
        return f"media {message.media_name!r} has another id in the store"
    if media.get("driver_class") != message.driver_class:
        return (
            f"media {message.media_name!r} is crawled by {media.get('driver_class')!r} in the "
            f"store, not {message.driver_class[:40]!r}"
        )
    others = sum(1 for doc in jobs if doc.get("media_name") != message.media_name)
    if others:
        return f"{others} of the batch's jobs belong to another media than {message.media_name!r}"
    return None


def checked_media(rt: Runtime, message: BatchMessage, jobs: list[dict]) -> dict[str, Any]:
    """The batch's media row, read from the store; BadMessage (dead-lettered: the jobs come
    back through dispatch expiry) when the message disagrees with it."""
    media = rt.media(message.media_name)
    reason = disagreement(message, media, jobs, rt.media_task(message.media_name, message.task))
    if reason is not None:
        media = rt.media(message.media_name, fresh=True)  # the cached rows may be stale
        task_row = rt.media_task(message.media_name, message.task)
        reason = disagreement(message, media, jobs, task_row)
    if reason is not None or media is None:
        raise BadMessage(f"batch {message.dispatch_id} refused: {reason}")
    return media

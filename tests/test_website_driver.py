"""The website driver through real runs: both pagination styles, articles and comments stored
exactly as the demo website serves them, each page fetched once; endless pagination stops at
the run's depth bound, and what the bound cut is counted on the run."""

from __future__ import annotations

from datetime import timedelta

from crawlsched.catalog import JobState
from crawlsched.demo.website import DemoWebsite
from crawlsched.flow import schedule_ops
from crawlsched.planning.run_names import FINISHED, run_id_for
from crawlsched.reference import MediaRow, ReferenceData, TaskRow
from crawlsched.runtime import get_runtime
from tests.support.waiting import wait_for

SCHEDULE_NUMBERS = iter(range(10**6))
TASKS = {
    "article": TaskRow(need_login=False, need_selenium=False, crawl_limit=100, batch_limit=5),
    "comment": TaskRow(need_login=False, need_selenium=False, crawl_limit=100, batch_limit=5),
}


def _reference(max_depth: int) -> ReferenceData:
    media = MediaRow(name="site", id=950, driver_class="website", max_depth=max_depth, tasks=TASKS)
    models = ["profile", "publication", "comment", "friend", "story", "article"]
    return ReferenceData(models=models, media=[media])


def _crawl(base_url: str, seeds: list[dict], max_depth: int = 50) -> dict:
    """Seed the sections, run one firing, wait for its end; returns the run."""
    from crawlsched.actors.planner import plan_crawls

    rt = get_runtime()
    rt.create_indexes()
    rt.reference.load(_reference(max_depth))
    now = rt.now()
    jobs = [
        {
            "target": f"{base_url}{seed['path']}",
            "media_name": "site",
            "media_name_id": 950,
            "task": "article",
            "state": int(JobState.PENDING),
            "enabled": True,
            "execution_date": now - timedelta(seconds=1),
            "attempt_count": 0,
            "interval_s": 3600,
            **{k: v for k, v in seed.items() if k != "path"},
        }
        for seed in seeds
    ]
    rt.jobs("websites").insert_new(jobs)
    schedule_id = f"site-{next(SCHEDULE_NUMBERS)}"
    targets = [j["target"] for j in jobs]
    schedule_ops.create(
        rt, schedule_id, {"interval_s": 3600, "target_collection": "websites", "targets": targets}
    )
    fire_at = now - timedelta(seconds=1)
    plan_crawls.send(schedule_id, fire_at.isoformat())
    run_id = run_id_for(schedule_id, fire_at)
    return wait_for(
        lambda: (r := rt.runs.get(run_id)) and r["state"] == FINISHED and r, 120, "the site run"
    )


def test_website_driver_stores_every_article_and_comment_of_both_sections(stub_pipeline):
    stub_pipeline(threads=4)
    rt = get_runtime()
    with DemoWebsite(articles=7, per_page=3, comments=6, per_comment_page=4) as site:
        run = _crawl(
            site.base_url,
            [
                {"path": "/news/", "pagination": "next_link"},
                {"path": "/blog/", "pagination": "page_param"},
            ],
        )
        fetches = dict(site.fetches)
    base = site.base_url
    stored = {d["key"]: d for d in rt.db.articles.find({"run_id": run["_id"]})}
    assert stored.keys() == {base + path for path in site.data.articles}
    for path, article in site.data.articles.items():
        doc = stored[base + path]
        assert {k: doc[k] for k in article} == article
    comments = {d["key"]: d for d in rt.db.comments.find({"run_id": run["_id"]})}
    expected = {
        f"{base}{path}#{c['id']}": {**c, "article": base + path}
        for path, cs in site.data.comments.items()
        for c in cs
    }
    assert comments.keys() == expected.keys()
    assert len(expected) > 2 * 4  # several articles have comments, some over two pages
    for key, comment in expected.items():
        assert {k: comments[key][k] for k in comment} == comment
    # Every page requested exactly once; the blog's first empty page ended its pagination
    assert set(fetches.values()) == {1}
    assert run["counts"] == {"succeeded": run["planned"] + run["discovered"]}
    assert run["items"]["new"] == len(stored) + len(comments)


def test_endless_pagination_stops_at_the_depth_bound(stub_pipeline):
    stub_pipeline(threads=2)
    # A page_param section whose pages never run out: every page lists the same article
    with DemoWebsite(articles=1, per_page=1, comments=0) as site:
        site._list = lambda section, page: (  # type: ignore[method-assign]
            200,
            b'<html><body><article><a href="/news/a/0">a</a></article></body></html>',
        )
        run = _crawl(site.base_url, [{"path": "/blog/", "pagination": "page_param"}], max_depth=4)
        fetches = dict(site.fetches)
    # Depth 0..4 list pages fetched once each, the article once; the next page was cut
    lists = [p for p in fetches if p.startswith("/blog/")]
    assert len(lists) == 5 and set(fetches.values()) == {1}
    assert run["cut"] == {"depth": 2}  # the 6th list page and the article found at depth 4
    assert run["discovered"] == 5


def test_a_recrawl_counts_unchanged_and_changed_items_and_is_new_knows_them(stub_pipeline):
    stub_pipeline(threads=2)
    rt = get_runtime()
    with DemoWebsite(articles=3, per_page=5, comments=0) as site:
        first = _crawl(site.base_url, [{"path": "/news/", "pagination": "next_link"}])
        # When one article changes and the section is crawled again
        site.data.articles["/news/a/1"]["title"] = "News story 1, corrected"
        rt.db.websites.update_one(
            {"target": f"{site.base_url}/news/"},
            {"$set": {"execution_date": rt.now() - timedelta(seconds=1)}},
        )
        second = _crawl(site.base_url, [{"path": "/news/", "pagination": "next_link"}])
    assert first["items"] == {"new": 3}
    assert second["items"] == {"unchanged": 2, "changed": 1}
    # Re-crawls update in place: one document per article, first seen by the first run
    docs = list(rt.db.articles.find({}))
    assert len(docs) == 3 and {d["run_id"] for d in docs} == {second["_id"]}
    assert len({d["first_seen"] for d in docs}) == 1
    changed = rt.db.articles.find_one({"key": f"{site.base_url}/news/a/1"})
    assert (
        changed["title"] == "News story 1, corrected"
        and changed["last_seen"] > changed["first_seen"]
    )
    from crawlsched.drivers.context import CrawlContext

    model_ids = rt.model_ids()
    is_new = lambda model, key: not rt.results.exists(model, model_ids.get(model), key)  # noqa: E731
    context = CrawlContext(is_new=is_new)
    assert not context.is_new("article", f"{site.base_url}/news/a/1")
    assert context.is_new("article", f"{site.base_url}/news/a/99")


def test_website_driver_reads_pages_through_a_browser(chromedriver_node):
    from crawlsched.drivers.base import CrawlJob
    from crawlsched.drivers.browser_session import open_browser
    from crawlsched.drivers.context import CrawlBounds, CrawlContext
    from crawlsched.drivers.targets import parse_networks
    from crawlsched.drivers.website import WebsiteDriver
    from tests.support.workers import TEST_HOST_RULES

    with (
        DemoWebsite(articles=2, per_page=5, comments=4) as site,
        open_browser(chromedriver_node, host_resolver_rules=TEST_HOST_RULES) as browser,
    ):
        context = CrawlContext(
            browser=browser,
            allowed_networks=parse_networks(["127.0.0.1/32"]),
            bounds=CrawlBounds(max_depth=5),
        )
        url = f"{site.base_url}/news/a/1"
        job = CrawlJob("j", url, url, "article", "site", 50, document={"page": "article"})
        context.begin(job)
        WebsiteDriver().article(job, context)
    article = site.data.articles["/news/a/1"]
    [doc] = context.saved["article"]
    assert {k: doc[k] for k in article} == article
    assert [d.task for d in context.discovered.values()] == (
        ["comment"] if article["comment_count"] else []
    )

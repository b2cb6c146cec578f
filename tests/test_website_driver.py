"""The website driver through real runs: both pagination styles, articles and comments stored
exactly as the demo website serves them, each page fetched once; endless pagination stops at
the run's depth bound, and what the bound cut is counted on the run."""

from __future__ import annotations

from datetime import timedelta

from crawlsched.catalog import JobState
from crawlsched.demo.website import DemoWebsite
from crawlsched.flow import schedule_ops
from crawlsched.reference import MediaRow, ReferenceData, TaskRow
from crawlsched.runtime import get_runtime
from crawlsched.store.runs import FINISHED, run_id_for
from tests.support.waiting import wait_for

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
    schedule_id = f"site-{abs(hash(base_url))}"
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

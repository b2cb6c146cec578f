"""Pages dealt over their hosts before a children pass cuts batches (planning/host_spread.py):
properties of the deal, and a pass over two hosts' clumps giving batches of both hosts."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crawlsched.planning.host_spread import (
    deal_round_robin,
    origin_of,
    spread_over_hosts,
)

# Jobs as (host, serial): the serial tells jobs of one host apart and gives their order.
hosts = st.sampled_from(["a", "b", "c", "d", ""])
job_lists = st.lists(hosts, max_size=60).map(lambda hs: [(h, i) for i, h in enumerate(hs)])


def _host(job: tuple[str, int]) -> str:
    return job[0]


@given(job_lists, st.integers(min_value=1, max_value=70))
def test_the_deal_is_a_permutation_that_keeps_each_hosts_order_and_each_window(jobs, window):
    dealt = list(spread_over_hosts(jobs, _host, window))
    assert sorted(dealt) == sorted(jobs)
    for host in {h for h, _ in jobs}:
        assert [j for j in dealt if j[0] == host] == [j for j in jobs if j[0] == host]
    for start in range(0, len(jobs), window):
        assert sorted(dealt[start : start + window]) == sorted(jobs[start : start + window])


@given(job_lists)
def test_every_prefix_of_a_window_is_balanced_over_its_hosts(jobs):
    # No host gets its (k+1)-th job out before every other host of the window has had its
    # k-th, unless that other host has no more: the most hosts per batch a cut can give.
    dealt = deal_round_robin(jobs, _host)
    total = Counter(h for h, _ in jobs)
    taken: Counter = Counter()
    for host, _ in dealt:
        for other, count in total.items():
            if other != host and taken[other] < count:
                assert taken[host] <= taken[other], (dealt, host, other)
        taken[host] += 1


@given(st.lists(st.integers(), max_size=40), st.integers(min_value=1, max_value=50))
def test_one_host_keeps_the_order_as_it_came(serials, window):
    jobs = [("x", s) for s in serials]
    assert list(spread_over_hosts(jobs, _host, window)) == jobs


def test_a_window_below_one_is_refused():
    with pytest.raises(ValueError, match="window"):
        list(spread_over_hosts([("a", 1)], _host, 0))


@pytest.mark.parametrize(
    ("target", "origin"),
    [
        ("http://Example.COM/a?b=1", "http://example.com:"),
        ("https://example.com:8443/x", "https://example.com:8443"),
        ("HTTP://127.0.0.1:9/page", "http://127.0.0.1:9"),
        ("http://[::1]:81/", "http://::1:81"),
        ("jack_the_user", ""),
        ("/relative/path", ""),
        ("http://example.com:99999/", ""),  # a port out of range: not a URL a request reaches
    ],
)
def test_origin_of_a_target(target, origin):
    assert origin_of(target) == origin


def test_a_children_pass_over_two_hosts_clumps_cuts_batches_of_both_hosts(stub_broker, stub_worker):
    from crawlsched.catalog import JobState
    from crawlsched.demo.seed import demo_reference
    from crawlsched.flow.children import plan_discovered
    from crawlsched.planning.run_names import run_id_for
    from crawlsched.runtime import get_runtime
    from crawlsched.store.pipeline import TASKS_COLLECTION

    # Given a run whose pass finds 4 pages of host A, then 4 of host B (a clump each, as two
    # parents' links come), and web's batch limit set to 4
    rt = get_runtime()
    rt.create_indexes()
    reference = demo_reference("http://127.0.0.1:9")
    rt.reference.load(reference)
    web = rt.reference.media_by_name("web")
    rt.db[TASKS_COLLECTION].update_many({"media_name_id": web["_id"]}, {"$set": {"batch_limit": 4}})
    now = rt.now()
    run_id = run_id_for("sweep-websites", now)
    rt.runs.open(run_id, "sweep-websites", now, now)
    rt.runs.close_planning(run_id, 0, {}, now)
    pages = [f"http://127.0.0.1:{port}/p{i}" for port in (8001, 8002) for i in range(4)]
    rt.jobs("websites").insert_new(
        [
            {
                "target": url,
                "media_name": "web",
                "media_name_id": web["_id"],
                "task": "article",
                "state": int(JobState.PENDING),
                "enabled": True,
                "execution_date": now - timedelta(seconds=1),
                "human_validation": 0,
                "certitude": 0.5,
                # Due in page order: A's four first, then B's.
                "modified_at": now - timedelta(minutes=10 - n),
                "attempt_count": 0,
                # Discovered in the run, released by the report of the crawl that found them.
                "scope_run": run_id,
                "released": True,
            }
            for n, url in enumerate(pages)
        ]
    )
    sent: list = []

    # When the run's children pass cuts its batches
    assert plan_discovered(rt, run_id, "websites", sent.append, end_run=False) == 8

    # Then each batch holds pages of both hosts, two of each, and no page is in two batches
    target_of = {d["_id"]: d["target"] for d in rt.db.websites.find({}, {"target": 1})}
    batches = [[target_of[j] for j in m.decoded_job_ids()] for m in sent]
    assert sorted(len(b) for b in batches) == [4, 4]
    for batch in batches:
        assert Counter(origin_of(url) for url in batch) == {
            "http://127.0.0.1:8001": 2,
            "http://127.0.0.1:8002": 2,
        }
    assert sorted(url for batch in batches for url in batch) == sorted(pages)

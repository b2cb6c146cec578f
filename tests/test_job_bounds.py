"""A job's own discovery bounds: read from its document, over its media's, handed down to what
it discovers (pure: `crawlsched.drivers.job_bounds` and `CrawlContext.discover`), and taken
from the operator's input (`crawlsched.jobs_input`)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crawlsched.drivers import job_bounds
from crawlsched.drivers.base import CrawlJob
from crawlsched.drivers.context import CrawlBounds, CrawlContext
from crawlsched.errors import BadJobInput
from crawlsched.import_files import parse_import_file
from crawlsched.jobs_input import build_job_docs, job_input_from_row
from crawlsched.runtime import Runtime
from crawlsched.settings import Settings
from tests.support.cli_store import cli_on_fresh_store
from tests.test_cli_contract import invoke

NOW = datetime(2026, 1, 1, tzinfo=UTC)
WEB = {"_id": 100, "media_name": "web"}
ANY_VALUE = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 2000), st.floats(allow_nan=False), st.text(max_size=3)
)


@given(st.dictionaries(st.sampled_from(["max_depth", "max_pages", "other"]), ANY_VALUE))
def test_own_bounds_take_only_whole_numbers_from_zero(document):
    own = job_bounds.own_bounds(document)
    for name in job_bounds.BOUND_FIELDS:
        value = document.get(name)
        valid = isinstance(value, int) and not isinstance(value, bool) and value >= 0
        assert (own.get(name) == value) if valid else (name not in own)
    assert set(own) <= set(job_bounds.BOUND_FIELDS)


@given(
    depth=st.integers(0, 6),
    own_depth=st.one_of(st.none(), st.integers(0, 6)),
    media_depth=st.integers(0, 6),
)
def test_discover_follows_the_jobs_depth_over_the_medias(depth, own_depth, media_depth):
    document = {"_id": "seed"} if own_depth is None else {"_id": "seed", "max_depth": own_depth}
    url = "http://example.com/page"
    context = CrawlContext(bounds=CrawlBounds(max_depth=media_depth))
    context.begin(CrawlJob("j", url, url, "article", "web", 10, document=document, depth=depth))
    taken = context.discover("http://example.com/next")
    limit = media_depth if own_depth is None else own_depth
    assert taken == (depth + 1 <= limit)
    assert (context.cut["depth"] == 1) == (not taken)


@given(generations=st.integers(1, 5), max_pages=st.integers(0, 50), max_depth=st.integers(5, 9))
def test_bounds_and_their_seed_are_handed_down_every_generation(generations, max_pages, max_depth):
    # Given a planned job with its own bounds, and the chain of pages it leads to
    document = {"_id": "seed-id", "max_depth": max_depth, "max_pages": max_pages}
    for depth in range(generations):
        url = f"http://example.com/{depth}"
        context = CrawlContext(bounds=CrawlBounds(max_depth=0))
        context.begin(CrawlJob(document["_id"], url, url, "article", "web", 10, document, depth))
        assert context.discover(f"http://example.com/{depth + 1}")
        [found] = context.discovered.values()
        # Then each child carries the same bounds and the planned job it began at
        assert found.handed_down == {
            "max_depth": max_depth,
            "max_pages": max_pages,
            "seed_job": "seed-id",
        }
        document = {"_id": f"child-{depth}", **found.handed_down}


def test_a_job_without_bounds_hands_nothing_down():
    assert job_bounds.handed_down({"_id": 1, "max_depth": -1, "max_pages": True}, 1) == {}


def test_a_discovery_may_not_set_the_bounds_itself():
    url = "http://example.com/"
    context = CrawlContext(bounds=CrawlBounds(max_depth=3))
    context.begin(CrawlJob("j", url, url, "article", "web", 10, {"_id": "j"}))
    for name in ("max_depth", "max_pages", "seed_job"):
        with pytest.raises(ValueError, match=name):
            context.discover("http://example.com/x", **{name: 1})


def test_website_rows_store_their_bounds_and_pagination():
    row = {
        "kind": "website",
        "target": "https://example.com/news",
        "max_depth": 2,
        "max_pages": 5,
        "pagination": "page_param",
        "page_param": "p",
    }
    [doc] = build_job_docs(job_input_from_row(row), WEB, {"article"}, NOW)
    assert {k: doc[k] for k in ("max_depth", "max_pages", "pagination", "page_param")} == {
        "max_depth": 2,
        "max_pages": 5,
        "pagination": "page_param",
        "page_param": "p",
    }
    [plain] = build_job_docs(
        job_input_from_row({"kind": "website", "target": "https://example.com/"}),
        WEB,
        {"article"},
        NOW,
    )
    assert not {"max_depth", "max_pages", "pagination", "page_param"} & set(plain)


@pytest.mark.parametrize(
    ("row", "named"),
    [
        ({"max_depth": -1}, "max_depth"),
        ({"max_pages": -3}, "max_pages"),
        ({"max_depth": 1001}, "max_depth"),
        ({"pagination": "infinite_scroll"}, "pagination"),
        ({"page_param": "p"}, "page_param: only with pagination page_param"),
        ({"pagination": "page_param", "page_param": "a b"}, "page_param"),
        ({"kind": "profile", "media": "twitter", "target": "al", "max_depth": 1}, "max_depth"),
    ],
)
def test_bad_bounds_and_pagination_are_refused_naming_the_field(row, named):
    given_row = {"kind": "website", "target": "https://example.com/", **row}
    with pytest.raises(BadJobInput, match=named):
        job_input_from_row(given_row)


def test_csv_rows_carry_bounds_and_pagination(tmp_path):
    path = tmp_path / "sites.csv"
    path.write_text(
        "kind,target,max_depth,max_pages,pagination\n"
        "website,https://example.com/news,2,5,next_link\n"
        "website,https://example.com/blog,,,\n"
    )
    jobs = [job_input_from_row(row) for _, row in parse_import_file(path)]
    assert [(j.max_depth, j.max_pages, j.pagination) for j in jobs] == [
        (2, 5, "next_link"),
        (None, None, None),
    ]


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--depth", "-1"], "--depth"),
        (["--max-pages", "-1"], "--max-pages"),
        (["--depth", "1001"], "--depth"),
        (["--pagination", "scroll"], "--pagination"),
        (["--page-param", "p"], "page_param"),
    ],
)
def test_jobs_add_website_refuses_bad_bounds_in_one_line_exit_2(monkeypatch, args, named):
    with cli_on_fresh_store(monkeypatch, "bounds") as (_run, url):
        # As the `crawlsched` command runs it (usage errors in one line too)
        code, _, err = invoke("jobs", "add", "website", "https://example.com/", *args)
        assert code == 2, err
        [line] = err.strip().splitlines()
        assert line.startswith("error:") and named in line
        assert Runtime(Settings(mongo_url=url)).db.websites.count_documents({}) == 0


def test_jobs_add_website_stores_the_bounds_it_prints(monkeypatch):
    with cli_on_fresh_store(monkeypatch, "bounds") as (run, url):
        result = run(
            "jobs", "add", "website", "https://example.com/", "--depth", "2", "--max-pages", "5"
        )
        assert result.exit_code == 0, result.output
        assert "discovery: links 2 deep, at most 5 pages a run" in result.stdout
        [job] = Runtime(Settings(mongo_url=url)).db.websites.find({})
        assert (job["max_depth"], job["max_pages"]) == (2, 5)


def test_jobs_import_keeps_bounds_and_pagination_and_rejects_them_on_a_profile(
    monkeypatch, tmp_path
):
    rows = tmp_path / "rows.jsonl"
    rows.write_text(
        '{"kind": "website", "target": "https://example.com/blog", "max_depth": 3, '
        '"max_pages": 40, "pagination": "page_param", "page_param": "p"}\n'
        '{"kind": "profile", "media": "twitter", "target": "alice", "max_depth": 2}\n'
    )
    rejects = tmp_path / "rejects.jsonl"
    with cli_on_fresh_store(monkeypatch, "bounds") as (run, url):
        result = run("jobs", "import", str(rows), "--rejects", str(rejects))
        assert result.exit_code == 0, result.output
        assert "rows rejected" in result.stdout
        [job] = Runtime(Settings(mongo_url=url)).db.websites.find({})
        assert Runtime(Settings(mongo_url=url)).db.profiles.count_documents({}) == 0
    assert (job["max_depth"], job["max_pages"], job["pagination"], job["page_param"]) == (
        3,
        40,
        "page_param",
        "p",
    )
    [rejected] = [json.loads(line) for line in rejects.read_text().splitlines()]
    assert rejected["line"] == 2 and "max_depth: only a website job" in rejected["reason"]

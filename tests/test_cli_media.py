"""`crawlsched media list | show | add | update`: media rows changed in the store as a reference
file would set them, bad input refused with the field named (exit 2, nothing stored)."""

from __future__ import annotations

import json

import pytest

from crawlsched.reference import load_reference
from crawlsched.runtime import Runtime
from crawlsched.settings import Settings
from tests.support.api import serving
from tests.support.cli_remote import remote_cli
from tests.support.cli_store import cli_on_fresh_store


@pytest.fixture
def cli(monkeypatch):
    monkeypatch.setenv("CRAWLSCHED_TARGET_ALLOW_NETWORKS", '["127.0.0.1/32"]')
    with cli_on_fresh_store(monkeypatch, "media") as (run, url):
        yield run, url


def _stored(url: str, name: str) -> dict | None:
    rt = Runtime(Settings(mongo_url=url, broker_url="stub://"))
    media = rt.reference.media_by_name(name)
    if media is None:
        return None
    return {**media, "tasks": rt.reference.tasks_of(media["media_name_id"])}


def test_media_list_shows_every_reference_row(cli):
    run, _ = cli
    result = run("media", "list", "--json")
    assert result.exit_code == 0, result.output
    rows = {row["name"]: row for row in map(json.loads, result.stdout.splitlines())}
    assert set(rows) == {m.name for m in load_reference().media}
    assert rows["web"]["driver_class"] == "http"
    assert set(rows["web"]["tasks"]) == {"article", "comment"}


def test_media_show_json_is_a_reference_row(cli):
    run, _ = cli
    result = run("media", "show", "web", "--json")
    assert result.exit_code == 0, result.output
    row = json.loads(result.stdout)
    packaged = next(m for m in load_reference().media if m.name == "web")
    # The row validates as the reference file's own model and equals the packaged one.
    assert type(packaged).model_validate(row) == packaged


def test_media_add_stores_the_row_workers_read(cli):
    run, url = cli
    result = run(
        "media", "add", "news-site", "--driver", "website", "--task", "article",
        "--task", "comment", "--crawl-limit", "20", "--max-depth", "3", "--max-pages", "40",
        "--delay", "2", "--concurrency", "1", "--recrawl", "adaptive",
        "--min-interval", "600", "--max-interval", "86400",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    stored = _stored(url, "news-site")
    assert stored["driver_class"] == "website"
    assert (stored["max_depth"], stored["max_pages"]) == (3, 40)
    assert stored["politeness"] == {"delay_s": 2.0, "concurrency": 1}
    assert stored["recrawl"]["adaptive"] is True
    assert stored["recrawl"]["min_interval_s"] == 600
    assert {n: t["crawl_limit"] for n, t in stored["tasks"].items()} == {
        "article": 20,
        "comment": 20,
    }
    # A new id past the packaged ones (100 is `web`'s).
    assert stored["media_name_id"] == 101
    # And a website job can use it at once.
    added = run("jobs", "add", "website", "http://127.0.0.1:9/", "--media", "news-site")
    assert added.exit_code == 0, added.output


def test_media_update_changes_only_what_is_given(cli):
    run, url = cli
    before = _stored(url, "web")
    result = run("media", "update", "web", "--max-depth", "2", "--daily-pages", "500")
    assert result.exit_code == 0, result.output
    after = _stored(url, "web")
    assert after["max_depth"] == 2
    assert after["politeness"] == {"daily_pages": 500}
    for key in ("driver_class", "max_pages", "recrawl", "media_name_id"):
        assert after[key] == before[key], key
    assert after["tasks"] == before["tasks"]
    # A task changed: only its crawl limit moves.
    result = run("media", "update", "web", "--task", "comment", "--crawl-limit", "7")
    assert result.exit_code == 0, result.output
    tasks = _stored(url, "web")["tasks"]
    assert tasks["comment"]["crawl_limit"] == 7
    assert tasks["article"] == before["tasks"]["article"]


BAD = [
    (["media", "add", "x", "--driver", "nosuch", "--task", "article"], "driver_class"),
    (["media", "add", "x", "--driver", "http", "--task", "article", "--max-depth", "-1"],
     "max_depth"),
    (["media", "add", "x", "--driver", "http", "--task", "article", "--max-pages", "-5"],
     "max_pages"),
    (["media", "add", "x", "--driver", "http", "--task", "nosuch"], "unknown tasks"),
    (["media", "add", "x", "--driver", "http"], "--task"),
    (["media", "add", "x", "--task", "article"], "--driver"),
    (["media", "add", "web", "--driver", "http", "--task", "article"], "exists"),
    (["media", "add", "x", "--driver", "http", "--task", "article", "--id", "100"], "id"),
    (["media", "add", "Bad Name", "--driver", "http", "--task", "article"], "name"),
    (["media", "update", "web", "--delay", "-1"], "politeness.delay_s"),
    (["media", "update", "web", "--concurrency", "0"], "politeness.concurrency"),
    (["media", "update", "web", "--driver", "nosuch"], "driver_class"),
    (["media", "update", "web", "--min-interval", "0"], "recrawl.min_interval_s"),
    (["media", "update", "web", "--crawl-limit", "0", "--task", "article"],
     "tasks.article.crawl_limit"),
    (["media", "update", "web", "--crawl-limit", "5"], "--task"),
    (["media", "update", "web", "--id", "7"], "--id"),
    (["media", "update", "nosuch", "--max-depth", "1"], "no media 'nosuch'"),
    (["media", "show", "nosuch"], "no media 'nosuch'"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("args", "named"), BAD, ids=lambda v: " ".join(v) if isinstance(v, list) else v
)
def test_media_bad_input_is_exit_2_naming_the_field(cli, args, named):
    run, url = cli
    before = {name: _stored(url, name) for name in ("web", "x")}
    result = run(*args)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), result.stderr
    assert named in lines[0]
    # Nothing changed.
    assert {name: _stored(url, name) for name in ("web", "x")} == before


def test_media_reads_take_a_read_token_and_changes_an_admin_one(embedded_mongo_url):
    # Given the API over a seeded store (the command line goes there with CRAWLSCHED_API_URL)
    with serving(embedded_mongo_url) as api:
        reader = remote_cli(api.url, api.read_token)
        listed = reader("media", "list", "--json")
        assert listed.exit_code == 0, listed.output
        names = {json.loads(line)["name"] for line in listed.stdout.splitlines()}
        assert "web" in names
        shown = reader("media", "show", "web")
        assert shown.exit_code == 0 and "driver_class    http" in shown.stdout
        refused = reader("media", "update", "web", "--max-depth", "4")
        assert refused.exit_code == 1 and "403" in refused.stderr
        assert api.runtime.media("web", fresh=True).get("max_depth") != 4
        changed = remote_cli(api.url, api.admin_token)("media", "update", "web", "--max-depth", "4")
        assert changed.exit_code == 0, changed.output
        # The server's own runtime (its workers) sees the new bound at once.
        assert api.runtime.media("web")["max_depth"] == 4

"""`crawlsched hosts list|show|block|unblock|set`: what an operator sees of the cluster's one
clock per host and how they steer it, on a small embedded store."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta

import pytest

from crawlsched.runtime import Runtime
from crawlsched.settings import Settings
from tests.support.cli_store import Invoke, cli_on_fresh_store

HOST = "http://127.0.0.1:8001"


@pytest.fixture
def setup(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Invoke, Runtime]]:
    with cli_on_fresh_store(monkeypatch, "cli-hosts") as (run, url):
        yield run, Runtime(Settings(mongo_url=url, broker_url="stub://"))


def _rows(run: Invoke) -> dict[str, dict]:
    result = run("hosts", "list", "--json")
    assert result.exit_code == 0, result.output
    return {row["host"]: row for row in map(json.loads, result.stdout.splitlines())}


def test_a_held_host_shows_its_holder_limits_and_pages_today(setup):
    run, rt = setup
    # Given a host a worker holds, that sent 3 pages and was told a Crawl-delay of 2 s
    now = rt.now()
    rt.hosts.store_robots(HOST, 200, "User-agent: *\nCrawl-delay: 2\n", 2.0, now)
    rt.hosts.acquire(HOST, "vm:123", rt.host_policy, now, 10.0)
    rt.hosts.renew(
        HOST, "vm:123", now, 10.0, pages=3, next_start=now + timedelta(seconds=2), in_flight=1
    )
    # Then the list shows it, with the robots.txt delay in force over the settings' 1 s
    row = _rows(run)[HOST]
    assert row["in_flight"] == 1
    table = run("hosts", "list")
    assert "flight" in table.stdout and "1/2" in table.stdout  # (the header may wrap)
    assert (row["held_by"], row["delay_s"], row["crawl_delay_s"]) == ("vm:123", 2.0, 2.0)
    assert (row["concurrency"], row["pages_today"], row["blocked_until"]) == (2, 3, None)
    shown = run("hosts", "show", "http://127.0.0.1:8001/any/path")
    assert shown.exit_code == 0 and "vm:123" in shown.stdout


def test_an_operator_blocks_unblocks_and_sets_limits(setup):
    run, rt = setup
    # A host never crawled is blocked only when asked for (a typo would pace a phantom host)
    args = ("hosts", "block", HOST, "--for", "600", "--reason", "asked us to stop")
    assert run(*args).exit_code == 2 and rt.hosts.list() == []
    blocked = run(*args, "--new")
    assert blocked.exit_code == 0, blocked.output
    row = _rows(run)[HOST]
    assert row["blocked_reason"] == "asked us to stop" and row["blocked_until"]
    # A worker asking for the host now is refused until then, for the operator's reason
    decision, _ = rt.hosts.acquire(HOST, "vm:1", rt.host_policy, rt.now(), 10.0)
    assert decision.why == "blocked: asked us to stop"
    assert run("hosts", "unblock", HOST).exit_code == 0
    assert _rows(run)[HOST]["blocked_until"] is None

    # A name without its scheme means the host crawled there (here http), not another one
    limited = run("hosts", "set", "127.0.0.1:8001", "--delay", "5", "--daily-pages", "100")
    assert limited.exit_code == 0, limited.output
    assert list(_rows(run)) == [HOST]
    row = _rows(run)[HOST]
    assert (row["delay_s"], row["daily_pages"], row["concurrency"]) == (5.0, 100, 2)
    assert run("hosts", "set", HOST, "--clear").exit_code == 0
    assert (_rows(run)[HOST]["delay_s"], _rows(run)[HOST]["daily_pages"]) == (1.0, 0)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("hosts", "show", "http://nowhere.test:9"), "no host http://nowhere.test:9"),
        (("hosts", "unblock", "nowhere.test"), "no host https://nowhere.test:443"),
        (("hosts", "show", "http://"), "not a host"),
        (("hosts", "set", HOST), "give --delay, --concurrency or --daily-pages"),
        (("hosts", "set", HOST, "--clear", "--delay", "1"), "or --clear alone"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(setup, args, message):
    run, rt = setup
    result = run(*args)
    assert result.exit_code == 2
    assert message in " ".join(result.stderr.split())
    assert rt.hosts.list() == []  # nothing was written

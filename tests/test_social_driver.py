"""The demo social network's driver, task by task, against the network served on 127.0.0.1:
what each task stores equals what the network serves; the account logs in once per batch; a
wrong password is LoginRejected; going too fast is RateLimited until Retry-After; stories exist
only for a real browser."""

from __future__ import annotations

from datetime import UTC, datetime

import httpx
import pytest
from parsel import Selector

from crawlsched.demo.social import DemoSocialNetwork
from crawlsched.drivers.base import Account, CrawlJob, LoginRejected, RateLimited
from crawlsched.drivers.browser_session import open_browser
from crawlsched.drivers.context import CrawlBounds, CrawlContext
from crawlsched.drivers.fetching import PoliteHttp
from crawlsched.drivers.social import DemoSocialDriver
from crawlsched.drivers.targets import parse_networks
from tests.support.workers import TEST_HOST_RULES

LOOPBACK = parse_networks(["127.0.0.1/32"])
HANDLES = ["ada", "bob"]


@pytest.fixture
def network():
    with DemoSocialNetwork(HANDLES, {"alice": "pw", "eve": "pw"}) as net:
        yield net


def _context(net, client, password="pw", user="alice", browser=None) -> CrawlContext:
    account = Account(user, password)
    origin = (net.base_url,)
    http = PoliteHttp(client, allowed_networks=LOOPBACK, account=account, secret_hosts=origin)
    return CrawlContext(
        http=http, browser=browser, account=account, secret_hosts=origin,
        allowed_networks=LOOPBACK, crawl_limit=1000, bounds=CrawlBounds(max_depth=50),
    )  # fmt: skip


def _run(context, task: str, url: str, depth: int = 0, **document):
    job = CrawlJob("j", url, url, task, "demo", 1000, document=document, depth=depth)
    context.begin(job)
    getattr(DemoSocialDriver(), task)(job, context)
    return context.saved, list(context.discovered.values())


def test_profile_and_publication_store_what_the_network_serves(network):
    with httpx.Client(timeout=10) as client:
        context = _context(network, client)
        saved, _ = _run(context, "profile", f"{network.base_url}/u/ada")
        assert saved["profile"] == [{"key": "ada", **network.data["ada"].card()}]
        saved, _ = _run(context, "publication", f"{network.base_url}/u/bob")
    posts = network.data["bob"].posts
    assert saved["publication"] == [
        {"key": f"bob/post/{p['id']}", "handle": "bob", "id": p["id"], "text": p["text"],
         "date": p["date"]}
        for p in posts
    ]  # fmt: skip
    assert saved["comment"] == [
        {"key": f"bob/post/{p['id']}/comment/{c['id']}", "post": f"bob/post/{p['id']}", **c}
        for p in posts
        for c in p["comments"]
    ]


def test_friend_pages_are_discovered_until_both_lists_are_read_with_one_login(network):
    with httpx.Client(timeout=10) as client:
        context = _context(network, client)
        saved, found = _run(context, "friend", f"{network.base_url}/u/ada")
        friends = list(saved["friend"])
        while found:  # the run's part: each discovered page becomes a job of its own
            page = found.pop(0)
            saved, more = _run(context, "friend", page.url, page.depth, **dict(page.fields))
            assert all(d.depth == page.depth + 1 for d in more)
            friends += saved["friend"]
            found += more
    profile = network.data["ada"]
    assert sorted(f["other"] for f in friends if f["list"] == "followers") == profile.followers
    assert sorted(f["other"] for f in friends if f["list"] == "followings") == profile.followings
    assert len(profile.followers) >= 150  # hundreds, over several pages
    logins = [entry for entry in network.log if entry[0] == "POST"]
    assert len(logins) == 1  # one login for the whole batch
    assert {user for method, path, user in network.log if "followers" in path} == {"alice"}


def test_replies_need_the_login_and_match(network):
    with httpx.Client(timeout=10) as client:
        saved, _ = _run(_context(network, client), "profile_replies", f"{network.base_url}/u/bob")
    assert saved["comment"] == [
        {"key": f"bob/reply/{r['id']}", "handle": "bob", **r} for r in network.data["bob"].replies
    ]


def test_wrong_password_is_login_rejected(network):
    with httpx.Client(timeout=10) as client, pytest.raises(LoginRejected):
        _run(_context(network, client, password="wrong"), "friend", f"{network.base_url}/u/ada")
    assert not any(path.startswith("/u/ada/followers") and user for _, path, user in network.log)


def test_too_fast_is_rate_limited_until_retry_after():
    with (
        DemoSocialNetwork(HANDLES, {"alice": "pw"}, rate_limit=(2, 30.0)) as net,
        httpx.Client(timeout=10) as client,
        pytest.raises(RateLimited) as caught,
    ):
        _run(_context(net, client), "friend", f"{net.base_url}/u/ada")
    wait = (caught.value.until - datetime.now(UTC)).total_seconds()
    assert 20 < wait <= 31  # Retry-After was about the rest of the 30 s window


def test_stories_need_a_browser_and_match_in_chrome(network, chromedriver_node):
    url = f"{network.base_url}/u/ada"
    plain = httpx.get(f"{url}/stories", timeout=10).text
    assert Selector(text=plain).css("li.story") == []  # plain HTTP sees none
    with (
        httpx.Client(timeout=10) as client,
        open_browser(chromedriver_node, host_resolver_rules=TEST_HOST_RULES) as browser,
    ):
        saved, _ = _run(_context(network, client, browser=browser), "stories", url)
    assert saved["story"] == [
        {"key": f"ada/story/{s['id']}", "handle": "ada", **s} for s in network.data["ada"].stories
    ]

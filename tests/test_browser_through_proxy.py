"""A real Chrome on a chromedriver node, going out through the batch's leased proxy: its
filtering proxy chained to a forward proxy (`batch_browser` starts one per session). The
stories the page's script draws arrive, and every request the browser made reached the
network through the forward proxy (its log), with the proxy's credentials."""

from __future__ import annotations

from crawlsched.demo.forward_proxy import ForwardProxy
from crawlsched.demo.social import DemoSocialNetwork
from crawlsched.drivers.base import CrawlJob
from crawlsched.drivers.browser_proxy import FilteringProxy
from crawlsched.drivers.browser_session import open_browser
from crawlsched.drivers.context import CrawlBounds, CrawlContext
from crawlsched.drivers.social import DemoSocialDriver
from crawlsched.drivers.targets import parse_networks
from crawlsched.drivers.upstream import Upstream
from tests.support.workers import TEST_HOST_RULES

LOOPBACK = parse_networks(["127.0.0.1/32"])


def test_stories_in_chrome_come_through_the_leased_proxy(chromedriver_node):
    with (
        DemoSocialNetwork(["ada"], {}) as network,
        ForwardProxy("127.0.0.61", "proxy-user", "proxy-pw") as forward,
    ):
        upstream = Upstream.from_url(forward.url, "proxy-user", "proxy-pw")
        chained = FilteringProxy(LOOPBACK, upstream=upstream).start()
        try:
            with open_browser(
                chromedriver_node, host_resolver_rules=TEST_HOST_RULES, proxy_url=chained.url
            ) as browser:
                context = CrawlContext(
                    browser=browser, allowed_networks=LOOPBACK, crawl_limit=100,
                    bounds=CrawlBounds(),
                )  # fmt: skip
                url = f"{network.base_url}/u/ada"
                job = CrawlJob("j", "ada", url, "stories", "demo", 100)
                context.begin(job)
                DemoSocialDriver().stories(job, context)
        finally:
            chained.stop()
        port = int(network.base_url.rsplit(":", 1)[1])

    assert context.saved["story"] == [
        {"key": f"ada/story/{s['id']}", "handle": "ada", **s} for s in network.data["ada"].stories
    ]
    to_network = [r for r in forward.log if r.target_port == port]
    assert to_network, forward.log
    assert all(r.client_user == "proxy-user" for r in to_network)
    assert chained.upstream_failures == 0

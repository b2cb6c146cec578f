"""Browser batches: pages per second through one Chrome session vs a new session per page.

The same N local JavaScript pages (tests/support/js_site.py), on one local chromedriver node
(Debian's), in one run. Last line: JSON with pages, one_session_pps, session_per_page_pps, speedup.

    .venv/bin/python benchmarks/bench_browser.py [--pages 20]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from crawlsched.demo.node import LocalChromedriver  # noqa: E402
from crawlsched.drivers.base import CrawlContext, CrawlJob  # noqa: E402
from crawlsched.drivers.browser import BrowserPageDriver  # noqa: E402
from crawlsched.drivers.browser_session import open_browser  # noqa: E402
from crawlsched.drivers.targets import parse_networks  # noqa: E402
from tests.support.js_site import JsSite  # noqa: E402

RULES = "MAP * ~NOTFOUND , EXCLUDE 127.0.0.1"


# The benchmark's site runs on loopback: admitted explicitly, as in the demo.
LOOPBACK = parse_networks(["127.0.0.1/32"])


def crawl(driver, browser, url: str) -> None:
    job = CrawlJob("j", "t", url, "profile", "tiktok", crawl_limit=10)
    result = driver.crawl(job, CrawlContext(http=None, browser=browser, allowed_networks=LOOPBACK))
    assert result.items[0]["rendered"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=20)
    args = parser.parse_args()
    driver = BrowserPageDriver()
    with LocalChromedriver() as node, JsSite() as site:
        urls = [f"{site.base_url}/page/p{i}" for i in range(args.pages)]
        started = time.perf_counter()
        with open_browser(node.url, host_resolver_rules=RULES) as browser:
            for url in urls:
                crawl(driver, browser, url)
        one = args.pages / (time.perf_counter() - started)
        started = time.perf_counter()
        for url in urls:
            with open_browser(node.url, host_resolver_rules=RULES) as browser:
                crawl(driver, browser, url)
        each = args.pages / (time.perf_counter() - started)
    figures = {
        "pages": args.pages,
        "one_session_pps": round(one, 2),
        "session_per_page_pps": round(each, 2),
        "speedup": round(one / each, 2),
    }
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What a crawl session's Chrome asks for by itself, seen at the worker's filtering proxy.

A session through the proxy loads one local page. Chrome's own services are switched off by
flags; what is left (the component updater's few essential components and, in builds that
carry Google API keys such as Debian's chromium, the account reconciler) is refused at the
proxy. The test pins that remainder: a new kind of background request, or the network time
query coming back, fails it.
"""

from __future__ import annotations

import time
from http.server import BaseHTTPRequestHandler

from crawlsched.drivers.browser_proxy import FilteringProxy
from crawlsched.drivers.browser_session import open_browser
from crawlsched.drivers.targets import parse_networks
from tests.support.serving import running, send_html
from tests.support.waiting import wait_for

# Refused at the proxy, not switched off by any flag of this Chrome (see the module docstring)
KNOWN_BACKGROUND_HOSTS = {"update.googleapis.com", "accounts.google.com"}


class _Page(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.server.log.append(self.path)
        send_html(self, b"<html><head><title>p</title></head><body>page</body></html>")

    def log_message(self, *args) -> None:
        pass


def test_chrome_asks_nothing_but_the_page_and_the_known_background_hosts(chromedriver_node):
    with running(_Page, host="127.0.0.2", log=[]) as site:
        proxy = FilteringProxy(parse_networks(["127.0.0.2/32"])).start()
        try:
            with open_browser(chromedriver_node, proxy_url=proxy.url) as browser:
                browser.get(f"http://127.0.0.2:{site.server_address[1]}/page")
                assert browser.title == "p"
                # Chrome's start-up requests have come once the account reconciler has asked
                # (it always does, after the time query and the updater); a little more time
                # for anything after it.
                wait_for(
                    lambda: any(r.startswith("accounts.google.com:") for r in proxy.refused),
                    60,
                    "Chrome's background requests at the proxy",
                )
                time.sleep(3)
            refused_hosts = {r.rsplit(":", 1)[0] for r in proxy.refused}
        finally:
            proxy.stop()
    # The page's own requests went through; Chrome's own services asked for nothing else
    assert "/page" in site.log
    assert refused_hosts <= KNOWN_BACKGROUND_HOSTS, refused_hosts - KNOWN_BACKGROUND_HOSTS

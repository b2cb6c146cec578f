"""What a crawl session's Chrome asks for by itself, seen at the worker's filtering proxy.

A session through the proxy loads one local page. Chrome's own services are switched off by
flags; what no flag switches off (the component updater's essential components and, in builds
that carry Google API keys such as Debian's chromium, the account reconciler) is silenced: those
hosts bypass the proxy and resolve to nothing (`CRAWLSCHED_BROWSER_SILENCED_HOSTS`). The test
first opens a session with nothing silenced, which shows those requests arriving and how long
they take to come, then one with the defaults, held at least twice as long: nothing reaches the
proxy but the page's own requests.
"""

from __future__ import annotations

import time
from http.server import BaseHTTPRequestHandler

import pytest
from pydantic import ValidationError

from crawlsched.drivers.browser_proxy import FilteringProxy
from crawlsched.drivers.browser_session import chrome_options, open_browser
from crawlsched.drivers.targets import parse_networks
from crawlsched.settings import SILENCED_HOSTS, Settings
from tests.support.serving import running, send_html
from tests.support.waiting import wait_for


class _Page(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.server.log.append(self.path)
        send_html(self, b"<html><head><title>p</title></head><body>page</body></html>")

    def log_message(self, *args) -> None:
        pass


def _session(node: str, silenced: tuple[str, ...], hold_s: float | None) -> tuple[set, list, float]:
    """(hosts refused at the proxy, the site's log, seconds the session was held). Held until
    the account reconciler has asked (`hold_s` None), else for `hold_s`."""
    with running(_Page, host="127.0.0.2", log=[]) as site:
        proxy = FilteringProxy(parse_networks(["127.0.0.2/32"])).start()
        try:
            with open_browser(node, proxy_url=proxy.url, silenced_hosts=silenced) as browser:
                started = time.monotonic()
                browser.get(f"http://127.0.0.2:{site.server_address[1]}/page")
                assert browser.title == "p"
                if hold_s is None:
                    wait_for(
                        lambda: any(r.startswith("accounts.google.com:") for r in proxy.refused),
                        60,
                        "Chrome's background requests at the proxy",
                    )
                else:
                    time.sleep(hold_s)
                held = time.monotonic() - started
            return {r.rsplit(":", 1)[0] for r in proxy.refused}, list(site.log), held
        finally:
            proxy.stop()


def test_chrome_s_own_requests_never_reach_the_proxy(chromedriver_node):
    # Given a session with nothing silenced: Chrome's remainder arrives, and nothing else
    control, control_log, took = _session(chromedriver_node, (), hold_s=None)
    assert "accounts.google.com" in control
    assert control <= set(SILENCED_HOSTS), control - set(SILENCED_HOSTS)
    assert "/page" in control_log
    # When a session with the default silenced hosts is held twice as long (10 s at least)
    refused, log, _ = _session(chromedriver_node, SILENCED_HOSTS, hold_s=max(10.0, 2 * took))
    # Then the page's own request went through and nothing at all was refused at the proxy
    assert "/page" in log
    assert refused == set()


def test_silenced_hosts_come_first_in_the_resolver_rules_and_bypass_the_proxy():
    options = chrome_options(
        "MAP * ~NOTFOUND , EXCLUDE 127.0.0.1", "http://127.0.0.1:9", ("a.test",)
    )
    assert "--host-resolver-rules=MAP a.test ~NOTFOUND, MAP * ~NOTFOUND , EXCLUDE 127.0.0.1" in (
        options.arguments
    )
    assert "--proxy-bypass-list=<-loopback>;a.test" in options.arguments
    bare = chrome_options(silenced_hosts=())
    assert not any(a.startswith(("--host-resolver-rules", "--proxy")) for a in bare.arguments)


@pytest.mark.parametrize("name", ["a.test,b.test", "a.test;b.test", "MAP * ~NOTFOUND", "a..test"])
def test_silenced_hosts_must_be_plain_host_names(name):
    with pytest.raises(ValidationError, match="browser_silenced_hosts"):
        Settings(browser_silenced_hosts=[name])

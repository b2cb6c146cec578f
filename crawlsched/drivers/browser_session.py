"""One Chrome session on a Selenium node (Grid or chromedriver) for a whole batch.

`webdriver.Remote` never runs Selenium Manager (that is only for local drivers), so nothing is
downloaded: the node brings its own browser. The session is always quit, and a failure to quit
(the node may be gone) never hides the error that ended the batch.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import urllib3.exceptions
from selenium import webdriver
from selenium.common.exceptions import InvalidSessionIdException, WebDriverException

from crawlsched.drivers.base import DriverError
from crawlsched.drivers.targets import redact
from crawlsched.logs import get_logger
from crawlsched.settings import SILENCED_HOSTS

log = get_logger(__name__)

DISABLED_FEATURES = (
    "OptimizationHints",
    "OptimizationGuideModelDownloading",
    "OptimizationHintsFetching",
    "MediaRouter",
    "DialMediaRouteProvider",
    "Translate",
    "AutofillServerCommunication",
    "CertificateTransparencyComponentUpdater",
    # The network time tracker asks clients2.google.com/time/1/current on every start.
    "NetworkTimeServiceQuerying",
)
# Profile preferences: the WebRTC policy again (a node's Chrome may predate the switch) and no
# services that would fetch on their own.
CHROME_PREFS = {
    "webrtc.ip_handling_policy": "disable_non_proxied_udp",
    "safebrowsing.enabled": False,
    "translate.enabled": False,
    "search.suggest_enabled": False,
    "signin.allowed": False,
}
CHROME_ARGS = (
    "--headless=new",
    "--no-sandbox",  # nodes often run as root in containers
    "--disable-gpu",
    "--disable-dev-shm-usage",
    # WebRTC sends UDP (STUN, TURN, peers) by itself, around any HTTP proxy: only what a proxy
    # carries, i.e. nothing. The command-line form of the `webrtc.ip_handling_policy` pref.
    "--webrtc-ip-handling-policy=disable_non_proxied_udp",
    # Chrome's own services (updates, accounts, sync, metrics, safe browsing, optimization
    # hints, translate, cast) phone home on every session: through the filtering proxy that is
    # refused noise, and without it traffic nobody asked for. Only the page's requests remain.
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-component-extensions-with-background-pages",
    "--disable-default-apps",
    "--disable-sync",
    "--disable-domain-reliability",
    "--disable-client-side-phishing-detection",
    "--disable-breakpad",
    "--metrics-recording-only",
    "--disable-extensions",
    "--disable-features=" + ",".join(DISABLED_FEATURES),
)
# WebDriver errors whose text says the browser or its session is gone, not the page.
_LOST_MARKERS = (
    "chrome not reachable",
    "disconnected",
    "session deleted",
    "invalid session id",
    "target window already closed",
    "no such window",
)


def chrome_options(
    host_resolver_rules: str | None = None,
    proxy_url: str | None = None,
    silenced_hosts: Sequence[str] = SILENCED_HOSTS,
) -> webdriver.ChromeOptions:
    """Chrome's options for a crawl session. `silenced_hosts` (plain host names, checked by
    the settings) are what Chrome still asks by itself: they bypass the proxy and resolve to
    nothing, so they never reach the proxy or the network (a page cannot load them either)."""
    options = webdriver.ChromeOptions()
    for arg in CHROME_ARGS:
        options.add_argument(arg)
    options.add_experimental_option("prefs", dict(CHROME_PREFS))
    rules = [f"MAP {host} ~NOTFOUND" for host in silenced_hosts]
    if host_resolver_rules:
        rules.append(host_resolver_rules)  # after ours: the first rule that matches applies
    if rules:
        options.add_argument(f"--host-resolver-rules={', '.join(rules)}")
    if proxy_url:
        # Everything the page loads goes through the worker's filtering proxy; without the
        # bypass rule Chrome would send loopback requests around it.
        options.add_argument(f"--proxy-server={proxy_url}")
        options.add_argument(f"--proxy-bypass-list={';'.join(['<-loopback>', *silenced_hosts])}")
    return options


@contextlib.contextmanager
def open_browser(
    node_url: str,
    *,
    host_resolver_rules: str | None = None,
    page_load_timeout_s: float = 30,
    proxy_url: str | None = None,
    silenced_hosts: Sequence[str] = SILENCED_HOSTS,
) -> Iterator[webdriver.Remote]:
    options = chrome_options(host_resolver_rules, proxy_url, silenced_hosts)
    browser = webdriver.Remote(command_executor=node_url, options=options)
    try:
        browser.set_page_load_timeout(page_load_timeout_s)
        yield browser
    finally:
        try:
            browser.quit()
        except Exception as e:  # the node may be gone; its sessions went with it
            log.warning("browser_quit_failed", node=node_url, error=type(e).__name__)


# The HTTP status of the document the tab shows (Navigation Timing's `responseStatus`,
# Chrome 109+); null where the browser does not say (an older Chrome, an error page).
_STATUS_SCRIPT = """
const entry = performance.getEntriesByType("navigation")[0];
return entry && entry.responseStatus ? entry.responseStatus : null;
"""


def navigate(browser: webdriver.Remote, url: str, http: Any) -> None:
    """Load `url` as the page (the top-level navigation), under the host's rules as an HTTP
    request is (`PoliteHttp.paced`: robots.txt, the delay, the cap on requests at once and the
    daily budget hold across both, cluster-wide), and tell the host's clock how the site
    answered: a 429 or 503 blocks the host for every worker. What the page then loads by
    itself goes through the filtering proxy, unpaced. Without a polite client (`http` None),
    as is."""
    paced = getattr(http, "paced", None)
    if paced is None:
        browser.get(url)
        return
    with paced(url) as load:
        browser.get(url)
        status = browser.execute_script(_STATUS_SCRIPT)
        load.status = status if isinstance(status, int) and not isinstance(status, bool) else None


# A navigation that failed (refused, unreachable, an empty error response, a redirect to a
# refused address) ends on Chrome's own error page: its document is `chrome-error://…` while
# `current_url` still names the page that failed. Its `.error-code` says why.
_ERROR_PAGE_SCRIPT = """
if (!String(document.documentURI).startsWith("chrome-error:")) return null;
const code = document.querySelector(".error-code");
return (code && code.textContent.trim()) || "unknown error";
"""


def raise_if_error_page(browser: webdriver.Remote) -> None:
    """DriverError naming the failed URL and Chrome's error code when the browser shows its
    error page instead of a page the site sent: that is a failed crawl, never a result."""
    code = browser.execute_script(_ERROR_PAGE_SCRIPT)
    if code is not None:
        url = redact(str(browser.current_url))
        raise DriverError(f"{url}: the page did not load ({str(code)[:80]})")


def is_session_lost(exc: BaseException) -> bool:
    """True when the node or the session is gone (not one page's failure)."""
    if isinstance(exc, InvalidSessionIdException | ConnectionError):
        return True
    if isinstance(
        exc,
        urllib3.exceptions.MaxRetryError
        | urllib3.exceptions.NewConnectionError
        | urllib3.exceptions.ProtocolError,
    ):
        return True
    if isinstance(exc, WebDriverException):
        text = (exc.msg or "").lower()
        return any(marker in text for marker in _LOST_MARKERS)
    return False

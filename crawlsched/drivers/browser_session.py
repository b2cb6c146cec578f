"""One Chrome session on a Selenium node (Grid or chromedriver) for a whole batch.

`webdriver.Remote` never runs Selenium Manager (that is only for local drivers), so nothing is
downloaded: the node brings its own browser. The session is always quit, and a failure to quit
(the node may be gone) never hides the error that ended the batch.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import urllib3.exceptions
from selenium import webdriver
from selenium.common.exceptions import InvalidSessionIdException, WebDriverException

from crawlsched.logs import get_logger

log = get_logger(__name__)

CHROME_ARGS = (
    "--headless=new",
    "--no-sandbox",  # nodes often run as root in containers
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--no-first-run",
    # Without these Chrome phones home at start-up; on a closed network that is noise and delay.
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
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
    host_resolver_rules: str | None = None, proxy_url: str | None = None
) -> webdriver.ChromeOptions:
    options = webdriver.ChromeOptions()
    for arg in CHROME_ARGS:
        options.add_argument(arg)
    if host_resolver_rules:
        options.add_argument(f"--host-resolver-rules={host_resolver_rules}")
    if proxy_url:
        # Everything the page loads goes through the worker's filtering proxy; without the
        # bypass rule Chrome would send loopback requests around it.
        options.add_argument(f"--proxy-server={proxy_url}")
        options.add_argument("--proxy-bypass-list=<-loopback>")
    return options


@contextlib.contextmanager
def open_browser(
    node_url: str,
    *,
    host_resolver_rules: str | None = None,
    page_load_timeout_s: float = 30,
    proxy_url: str | None = None,
) -> Iterator[webdriver.Remote]:
    browser = webdriver.Remote(
        command_executor=node_url, options=chrome_options(host_resolver_rules, proxy_url)
    )
    try:
        browser.set_page_load_timeout(page_load_timeout_s)
        yield browser
    finally:
        try:
            browser.quit()
        except Exception as e:  # the node may be gone; its sessions went with it
            log.warning("browser_quit_failed", node=node_url, error=type(e).__name__)


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

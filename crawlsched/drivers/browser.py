"""The browser driver: load the job's URL in the batch's Chrome session, after JavaScript ran.

Saves the same document shape as the HTTP driver (title, links, size), marked `rendered`, so
results of either look alike, and discovers the page's links. Session-level errors propagate
as they are: the crawl flow tells a dead node from a bad page and puts the batch's remaining
jobs back to wait.
"""

from __future__ import annotations

from urllib.parse import urldefrag

from selenium.common.exceptions import TimeoutException, WebDriverException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from crawlsched.catalog import TASK_RESULTS
from crawlsched.drivers.base import CrawlJob, DriverError
from crawlsched.drivers.browser_session import is_session_lost, navigate, raise_if_error_page
from crawlsched.drivers.context import CrawlContext
from crawlsched.drivers.targets import check_target
from crawlsched.errors import UnsafeTarget

READY_WAIT_S = 10
# Pages keep writing after `load` (timers, fetches): wait until the DOM has been quiet this long,
# but no longer than SETTLE_MAX_MS in all.
SETTLE_QUIET_MS = 250
SETTLE_MAX_MS = 5000
_SETTLE_SCRIPT = """
const done = arguments[arguments.length - 1];
const quiet = arguments[0], max = arguments[1];
let timer = setTimeout(finish, quiet);
const cap = setTimeout(finish, max);
const observer = new MutationObserver(() => {
  clearTimeout(timer);
  timer = setTimeout(finish, quiet);
});
observer.observe(document, {subtree: true, childList: true, characterData: true, attributes: true});
function finish() { observer.disconnect(); clearTimeout(timer); clearTimeout(cap); done(true); }
"""


class BrowserPageDriver:
    def crawl(self, job: CrawlJob, context: CrawlContext) -> None:
        browser = context.browser
        if browser is None:
            raise DriverError("this task needs a Selenium node but no browser session was opened")
        try:
            # Resolved here, not on the node: a node in another network may see other addresses;
            # the node's own resolver rules (CRAWLSCHED_BROWSER_HOST_RESOLVER_RULES) still apply.
            check_target(job.url, context.allowed_networks)
        except UnsafeTarget as e:
            raise DriverError(f"refused: {e}") from None
        try:
            navigate(browser, job.url, context.http)
            WebDriverWait(browser, READY_WAIT_S).until(
                lambda b: b.execute_script("return document.readyState") == "complete"
            )
            raise_if_error_page(browser)
            browser.set_script_timeout(SETTLE_MAX_MS / 1000 + 5)
            browser.execute_async_script(_SETTLE_SCRIPT, SETTLE_QUIET_MS, SETTLE_MAX_MS)
            raise_if_error_page(browser)  # the page may have navigated itself meanwhile
            hrefs = browser.execute_script(
                "return Array.from(document.querySelectorAll('a[href]'), a => a.href)"
            )
            title = browser.title
            text = browser.find_element(By.TAG_NAME, "body").text
            url = browser.current_url
        except TimeoutException as e:
            raise DriverError(f"{job.url}: page did not finish loading: {e.msg}") from e
        except WebDriverException as e:
            if is_session_lost(e):
                raise
            raise DriverError(f"{job.url}: {type(e).__name__}: {e.msg}") from e
        seen: dict[str, None] = {}
        for href in hrefs or []:
            absolute = urldefrag(str(href)).url
            if absolute.startswith(("http://", "https://")):
                seen.setdefault(absolute)
        links = list(seen)[: job.crawl_limit]
        page = {
            "key": url,
            "url": url,
            "title": title.strip(),
            "links": links,
            "text_chars": len(text),
            "rendered": True,
        }
        context.save(TASK_RESULTS[job.task].model, [page])
        for link in links:
            context.discover(link)

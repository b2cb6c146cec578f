"""A crawled page cannot send UDP past the filtering proxy.

A page on an allowed loopback address (127.0.0.2) opens an RTCPeerConnection whose STUN and
TURN servers are a UDP listener the test opens on a refused one (127.0.0.1). Chrome started
with crawlsched's options gathers its candidates and the listener receives nothing; the same
page in a Chrome without the WebRTC policy does reach it, so the check can fail.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator

import pytest
from selenium import webdriver

from crawlsched.drivers.browser_proxy import FilteringProxy
from crawlsched.drivers.browser_session import chrome_options, open_browser
from crawlsched.drivers.targets import parse_networks
from tests.support.serving import running, send_html
from tests.support.waiting import wait_for

PAGE = """<!doctype html><html><head><title>webrtc</title></head><body><script>
const pc = new RTCPeerConnection({{iceServers: [
  {{urls: "stun:127.0.0.1:{port}"}},
  {{urls: "turn:127.0.0.1:{port}?transport=udp", username: "u", credential: "p"}},
]}});
pc.createDataChannel("x");
pc.onicegatheringstatechange = () => {{
  if (pc.iceGatheringState === "complete") document.body.dataset.gathered = "yes";
}};
pc.createOffer().then(offer => pc.setLocalDescription(offer));
</script></body></html>"""


@contextlib.contextmanager
def _udp_listener() -> Iterator[tuple[int, list[tuple[str, int]]]]:
    """A UDP socket on 127.0.0.1 logging every datagram's sender."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(0.2)
    received: list[tuple[str, int]] = []
    stop = threading.Event()

    def listen() -> None:
        while not stop.is_set():
            try:
                _, sender = sock.recvfrom(65536)
            except TimeoutError:
                continue
            except OSError:
                return
            received.append(sender)

    thread = threading.Thread(target=listen, daemon=True)
    thread.start()
    try:
        yield sock.getsockname()[1], received
    finally:
        stop.set()
        thread.join(timeout=10)
        sock.close()


def _page_handler(page: str):
    from http.server import BaseHTTPRequestHandler

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            send_html(self, page.encode())

        def log_message(self, *args) -> None:
            pass

    return Handler


@pytest.fixture
def webrtc_page():
    with (
        _udp_listener() as (port, received),
        running(_page_handler(PAGE.format(port=port)), host="127.0.0.2") as site,
    ):
        proxy = FilteringProxy(parse_networks(["127.0.0.2/32"])).start()
        try:
            yield f"http://127.0.0.2:{site.server_address[1]}/page", proxy.url, received
        finally:
            proxy.stop()


def test_a_page_cannot_send_udp_to_a_refused_address(chromedriver_node, webrtc_page):
    url, proxy_url, received = webrtc_page
    with open_browser(chromedriver_node, proxy_url=proxy_url) as browser:
        browser.get(url)
        # Chrome is done with its ICE servers once gathering completes.
        wait_for(
            lambda: browser.execute_script("return document.body.dataset.gathered"),
            90,
            "ICE gathering to complete",
        )
    assert received == []


def test_without_the_webrtc_policy_the_same_page_reaches_the_listener(
    chromedriver_node, webrtc_page
):
    url, proxy_url, received = webrtc_page
    options = chrome_options(proxy_url=proxy_url)
    options._arguments = [a for a in options.arguments if "webrtc" not in a]
    options.experimental_options.pop("prefs", None)
    browser = webdriver.Remote(command_executor=chromedriver_node, options=options)
    try:
        browser.get(url)
        wait_for(lambda: received, 60, "a STUN/TURN datagram at the listener")
    finally:
        browser.quit()

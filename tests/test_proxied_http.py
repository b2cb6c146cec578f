"""A batch's HTTP client through its leased proxy (`PoliteHttp` over `proxied_client`), against
the project's forward proxy on loopback: what reaches the site, and how a refusing, stalling
or blocked proxy ends the batch's use of it (`ProxyFailed`, `ProxyBlocked`)."""

from __future__ import annotations

import ipaddress
import socket

import pytest

from crawlsched.demo.forward_proxy import ForwardProxy
from crawlsched.drivers.fetching import PoliteHttp
from crawlsched.drivers.proxied import (
    BlockSigns,
    ProxyBlocked,
    ProxyClients,
    ProxyFailed,
    ProxyWatch,
)
from tests.support.echo_site import EchoSite

LOOPBACK = (ipaddress.ip_network("127.0.0.1/32"),)


def _http(proxy_url: str, watch: ProxyWatch, user=None, password=None, deadline_s=10.0):
    client = ProxyClients(timeout_s=deadline_s).client(proxy_url, user, password)
    return PoliteHttp(client, allowed_networks=LOOPBACK, proxy=watch, deadline_s=deadline_s)


def _watch(**signs) -> ProxyWatch:
    return ProxyWatch("p", 0, BlockSigns.of(signs))


def test_the_site_sees_the_proxy_address_and_never_its_credentials():
    with EchoSite() as site, ForwardProxy("127.0.0.51", "proxy-user", "s3cret") as proxy:
        watch = _watch()
        answer = _http(proxy.url, watch, "proxy-user", "s3cret").get(f"{site.base_url}/a")
    assert answer.status_code == 200 and watch.answers == 1 and watch.failure is None
    [seen] = site.seen
    assert seen["peer"] == "127.0.0.51"
    assert "proxy-authorization" not in seen["headers"]
    assert "s3cret" not in repr(seen)
    assert [r.client_user for r in proxy.log] == ["proxy-user"]


def test_an_answer_with_a_block_sign_is_the_proxys_block():
    with EchoSite() as site, ForwardProxy("127.0.0.52", mode="block") as proxy:
        watch = _watch(block_markers=["proxy-blocked"])
        with pytest.raises(ProxyBlocked, match="blocked through proxy p"):
            _http(proxy.url, watch).get(f"{site.base_url}/a")
        assert isinstance(watch.failure, ProxyBlocked) and watch.answers == 0
        # A status its media declares is a block too; without signs a 429 is the page's answer
        with pytest.raises(ProxyBlocked, match="status 429"):
            _http(proxy.url, _watch(block_statuses=[429])).get(f"{site.base_url}/a")
        assert _http(proxy.url, _watch()).get(f"{site.base_url}/a").status_code == 429
    assert site.seen == []


@pytest.mark.parametrize("mode", ["refuse", "stall"])
def test_a_refusing_or_stalling_proxy_fails_and_the_site_is_never_reached(mode):
    with EchoSite() as site, ForwardProxy("127.0.0.53", mode=mode, stall_s=30) as proxy:
        watch = _watch()
        with pytest.raises(ProxyFailed, match="through proxy p failed"):
            _http(proxy.url, watch, deadline_s=1.0).get(f"{site.base_url}/a")
        assert isinstance(watch.failure, ProxyFailed)
    assert site.seen == []


def test_a_socks5_proxy_that_does_not_answer_fails_as_a_proxy():
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    watch = _watch()
    with EchoSite() as site, pytest.raises(ProxyFailed):
        _http(f"socks5://127.0.0.1:{port}", watch, deadline_s=2.0).get(f"{site.base_url}/a")
    assert site.seen == []

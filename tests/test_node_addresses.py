"""Selenium nodes follow the one address rule, with networks of their own
(CRAWLSCHED_NODE_ALLOW_NETWORKS): `nodes add` refuses a node on loopback in any spelling
before probing it, the probe client connects only to allowed addresses, and allowing crawl
targets on loopback does not allow nodes there (nor the other way round)."""

from __future__ import annotations

import socket
import uuid
from collections.abc import Iterator

import pytest
from typer.testing import CliRunner

from crawlsched.cli import app
from crawlsched.errors import NodeUnreachable, UnsafeTarget
from crawlsched.flow.destinations import check_node
from crawlsched.resources.node_probe import probe_node
from crawlsched.runtime import Runtime
from crawlsched.store.client import drop_embedded
from tests.conftest import settings_for_tests

SPELLINGS = ["127.0.0.1", "2130706433", "0x7f000001", "127.1", "LOCALHOST"]


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A loopback port that counts as reached once anything connects to it."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    sock.setblocking(False)
    try:
        yield sock
    finally:
        sock.close()


def connected(sock: socket.socket) -> bool:
    try:
        sock.accept()[0].close()
    except BlockingIOError:
        return False
    return True


@pytest.mark.parametrize("host", SPELLINGS)
def test_a_node_on_loopback_is_refused_unless_its_network_is_allowed_for_nodes(host):
    url = f"http://{host}:4444"
    crawl_only = settings_for_tests(node_allow_networks=[], target_allow_networks=["127.0.0.0/8"])
    with pytest.raises(UnsafeTarget, match="CRAWLSCHED_NODE_ALLOW_NETWORKS"):
        check_node(crawl_only, url)
    check_node(settings_for_tests(node_allow_networks=["127.0.0.0/8"]), url)


def test_the_probe_client_connects_only_to_allowed_node_networks(listener):
    url = f"http://2130706433:{listener.getsockname()[1]}"
    refusing = Runtime(settings_for_tests(node_allow_networks=[]))
    with pytest.raises(NodeUnreachable, match="refused"):
        probe_node(url, refusing.probe_http)
    assert not connected(listener)
    allowing = Runtime(settings_for_tests(node_allow_networks=["127.0.0.1/32"]))
    with pytest.raises(NodeUnreachable):  # a bare socket answers no /status
        probe_node(url, allowing.probe_http)
    assert connected(listener)


def test_nodes_add_refuses_a_loopback_node_before_probing_it(listener, monkeypatch):
    store = f"mongomock://nodes-{uuid.uuid4().hex}"
    monkeypatch.setenv("CRAWLSCHED_MONGO_URL", store)
    monkeypatch.setenv("CRAWLSCHED_TARGET_ALLOW_NETWORKS", '["127.0.0.0/8"]')  # crawls only
    monkeypatch.delenv("CRAWLSCHED_NODE_ALLOW_NETWORKS", raising=False)
    try:
        result = CliRunner().invoke(
            app, ["nodes", "add", f"http://127.1:{listener.getsockname()[1]}"]
        )
        assert result.exit_code == 2, result.output
        assert "add its network to CRAWLSCHED_NODE_ALLOW_NETWORKS" in result.output
        assert not connected(listener)
    finally:
        drop_embedded(store)

"""Processes of a deployment start at different RabbitMQ nodes (`CRAWLSCHED_BROKER_SPREAD`),
so one node does not hold every connection and lead every queue the processes declare."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from crawlsched import settings as settings_module
from crawlsched.settings import Settings, spread_nodes

NODES = "amqp://a:1/v;amqp://b:2/v;amqp://c:3/v"

urls_lists = st.lists(st.text(min_size=1, max_size=5), min_size=1, max_size=6, unique=True)


@given(urls_lists, st.integers(min_value=0, max_value=10**9))
def test_a_spread_order_is_a_rotation_starting_at_the_offset(urls, offset):
    order = spread_nodes(urls, offset)
    assert sorted(order) == sorted(urls)  # every node is still tried
    assert order[0] == urls[offset % len(urls)]
    # the same cyclic order: after each node comes the node that followed it
    position = {url: i for i, url in enumerate(urls)}
    for here, after in itertools.pairwise(order):
        assert position[after] == (position[here] + 1) % len(urls)


@given(urls_lists)
def test_consecutive_offsets_start_at_every_node(urls):
    firsts = {spread_nodes(urls, offset)[0] for offset in range(len(urls))}
    assert firsts == set(urls)


def test_processes_start_at_the_node_their_process_id_picks(monkeypatch):
    starts = set()
    for pid in (300, 301, 302):
        monkeypatch.setattr(settings_module.os, "getpid", lambda pid=pid: pid)
        starts.add(
            Settings(message_signing=False, broker_url=NODES, broker_spread=True).broker_urls[0]
        )
    assert starts == {"amqp://a:1/v", "amqp://b:2/v", "amqp://c:3/v"}


def test_without_spread_every_process_tries_the_nodes_in_the_given_order(monkeypatch):
    for pid in (300, 301, 302):
        monkeypatch.setattr(settings_module.os, "getpid", lambda pid=pid: pid)
        assert Settings(message_signing=False, broker_url=NODES).broker_urls == [
            "amqp://a:1/v",
            "amqp://b:2/v",
            "amqp://c:3/v",
        ]
        urls = Settings(message_signing=False, broker_url=NODES, broker_spread=False).broker_urls
        assert urls == ["amqp://a:1/v", "amqp://b:2/v", "amqp://c:3/v"]


def test_one_node_is_one_node_whatever_the_process():
    assert Settings(message_signing=False, broker_url="amqp://a:1/v").broker_urls == [
        "amqp://a:1/v"
    ]

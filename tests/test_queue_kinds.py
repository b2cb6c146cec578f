"""The queue arguments crawlsched declares: pure rules, checked for every combination."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crawlsched.brokers.queue_kinds import queue_arguments, server_major_version

roles = st.sampled_from(["main", "delay", "dead"])
types = st.sampled_from(["classic", "quorum"])
majors = st.integers(min_value=3, max_value=9)
limits = st.integers(min_value=1, max_value=1000)


def _args(role, queue_type, limit=20, major=3):
    return queue_arguments(
        role,
        queue_type,
        dead_letter_queue="q.XQ",
        dead_message_ttl_ms=604_800_000,
        delivery_limit=limit,
        server_major=major,
    )


@given(roles, types, limits, majors)
def test_quorum_is_declared_exactly_when_asked(role, queue_type, limit, major):
    args = _args(role, queue_type, limit, major)
    assert (args.get("x-queue-type") == "quorum") == (queue_type == "quorum")
    assert "x-max-priority" not in args  # quorum queues of 3.x refuse it


@given(st.sampled_from(["main", "delay"]), types, limits, majors)
def test_main_and_delay_queues_dead_letter_into_the_actors_dead_letter_queue(
    role, queue_type, limit, major
):
    args = _args(role, queue_type, limit, major)
    assert args["x-dead-letter-exchange"] == ""
    assert args["x-dead-letter-routing-key"] == "q.XQ"
    assert "x-message-ttl" not in args


@given(types, limits, majors)
def test_only_a_quorum_main_queue_has_a_delivery_limit(queue_type, limit, major):
    main = _args("main", queue_type, limit, major)
    assert main.get("x-delivery-limit") == (limit if queue_type == "quorum" else None)


@given(limits, majors)
def test_a_quorum_delay_queue_never_limits_deliveries(limit, major):
    delay = _args("delay", "quorum", limit, major)
    # RabbitMQ 4 limits every quorum queue by default (-1 switches it off); 3.x refuses -1.
    assert delay.get("x-delivery-limit") == (-1 if major >= 4 else None)


@given(types, majors)
def test_dead_letter_queue_keeps_messages_a_week_and_forwards_nothing(queue_type, major):
    dead = _args("dead", queue_type, 20, major)
    assert dead["x-message-ttl"] == 604_800_000
    assert "x-dead-letter-routing-key" not in dead and "x-delivery-limit" not in dead


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="queue_type"):
        _args("main", "stream")
    with pytest.raises(ValueError, match="delivery_limit"):
        _args("main", "quorum", limit=0)
    with pytest.raises(ValueError, match="role"):
        _args("side", "quorum")


@pytest.mark.parametrize(
    ("announced", "major"),
    [({"version": b"3.10.8"}, 3), ({"version": "4.1.0"}, 4), ({}, 3), ({"version": b"x"}, 3)],
)
def test_server_major_version(announced, major):
    assert server_major_version(announced) == major

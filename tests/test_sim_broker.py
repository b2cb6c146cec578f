"""The simulated broker (tests/sim/broker.py): at-least-once and out-of-order delivery, delays on
the virtual clock, redelivery after a crash, and dramatiq's retries and dead letters."""

from __future__ import annotations

import itertools
from contextlib import contextmanager
from datetime import UTC, datetime
from types import SimpleNamespace

import dramatiq
import pytest
from dramatiq.middleware import CurrentMessage
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.sim.broker import RetryPolicy, SimBroker
from tests.sim.world import CrashPolicy, World

START = datetime(2025, 1, 1, tzinfo=UTC)


@contextmanager
def broker_world(seed: int = 0, duplicate_p: float = 0.0, policy: CrashPolicy | None = None):
    with World(seed, START, policy) as world:
        yield world, SimBroker(world, duplicate_p)


NO_RETRY = RetryPolicy(max_retries=0)


def serve(world, broker, handler, policy=NO_RETRY, workers=1, name="w"):
    process = world.process(name)
    loop = broker.worker(process, ["q"], {"act": handler}, {"act": policy})
    for i in range(workers):
        world.spawn(process, loop, f"worker-{i}", daemon=True)
    return process


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**32))
def test_broker_delivers_every_message_at_least_once(seed):
    with broker_world(seed, duplicate_p=0.3) as (world, broker):
        handled: list[int] = []
        for i in range(30):
            broker.send("q", "act", (i,))
        serve(world, broker, handled.append, workers=3)
        assert world.run(broker.idle).reason == "until"
        stats = broker.stats["act"]
        assert set(handled) == set(range(30))
        assert len(handled) == 30 + stats["duplicated"] == stats["delivered"] == stats["acked"]
        assert stats["sent"] == 30


def test_broker_duplicates_and_reorders_for_some_seed():
    with broker_world(4, duplicate_p=0.3) as (world, broker):
        handled: list[int] = []
        for i in range(30):
            broker.send("q", "act", (i,))
        serve(world, broker, handled.append)
        world.run(broker.idle)
        assert broker.stats["act"]["duplicated"] > 0
        assert len(handled) > len(set(handled))
        firsts = list(dict.fromkeys(handled))
        assert firsts != sorted(firsts)  # a worker takes any ready message, not the oldest


def test_broker_honours_delays_on_the_virtual_clock():
    with broker_world() as (world, broker):
        seen: list[tuple[str, float]] = []
        broker.send("q", "act", ("late",), delay_s=30.0)
        broker.send("q", "act", ("now",))
        serve(world, broker, lambda tag: seen.append((tag, world.elapsed)))
        world.run(broker.idle)
        assert seen == [("now", 0.0), ("late", 30.0)]


def test_broker_redelivers_what_a_crashed_process_held():
    # Given a worker that crashes at its first store write, then comes back
    with broker_world(1) as (world, broker):
        seen: list[tuple[str, int, bool]] = []

        def handler(tag):
            message = CurrentMessage.get_current_message()
            seen.append((tag, world.current().generation, message.redelivered))
            world.store_step(None, "update_one")

        process = serve(world, broker, handler)
        world.crash_policy = CrashPolicy(1.0, budget=1)
        world.on_crash(lambda p: world.call_later(1.0, lambda: restart(p)))

        def restart(p):
            world.restart(p)
            loop = broker.worker(p, ["q"], {"act": handler})
            world.spawn(p, loop, "worker-0", daemon=True)

        broker.send("q", "act", ("job",))
        # When it runs
        assert world.run(broker.idle).reason == "until"
        # Then the message comes back, marked redelivered, to the new generation
        assert seen == [("job", 0, False), ("job", 1, True)]
        assert broker.stats["act"]["redelivered"] == 1 and broker.stats["act"]["acked"] == 1
        assert process.generation == 1


def test_broker_crash_instead_of_send_or_ack():
    with broker_world(2, policy=CrashPolicy(1.0, budget=2, points=frozenset({"send", "ack"}))) as (
        world,
        broker,
    ):
        serve(world, broker, lambda: broker.send("q2", "next"))
        broker.send("q", "act")  # from the test's thread: no crash point
        world.run(broker.idle, check=False)
        points = [c.point for c in world.crashes]
        assert points == ["send:next"]  # the handler died before its send; nothing was sent
        assert broker.stats["next"]["sent"] == 0 and broker.ready("q")[0].redelivered


def test_broker_retries_with_dramatiqs_backoff_then_dead_letters():
    policy = RetryPolicy(max_retries=3, min_backoff_ms=1000, max_backoff_ms=5000)
    with broker_world(3) as (world, broker):
        attempts: list[tuple[float, int]] = []

        def handler():
            message = broker.current().message
            assert CurrentMessage.get_current_message().options.get("retries", 0) == message.retries
            attempts.append((world.elapsed, message.retries))
            raise ValueError("always")

        serve(world, broker, handler, policy)
        broker.send("q", "act")
        world.run(broker.idle)
        assert [r for _, r in attempts] == [0, 1, 2, 3]  # max_retries retries after the first
        gaps = [b - a for (a, _), (b, _) in itertools.pairwise(attempts)]
        assert 1.0 <= gaps[0] <= 2.0 and 2.0 <= gaps[1] <= 4.0  # factor x 2^retries x [1, 2]
        assert 2.5 <= gaps[2] <= 5.0  # past max_backoff: 50-100 % of it
        ((message, reason),) = broker.dead_letters
        assert reason == "retries exceeded (3)" and message.retries == 3
        assert broker.stats["act"]["retried"] == 3 and broker.stats["act"]["dead_lettered"] == 1


def test_broker_dead_letters_throws_at_once_and_honours_retry_delay():
    policy = RetryPolicy(max_retries=5, throws=(KeyError,))
    with broker_world() as (world, broker):
        times: list[float] = []

        def handler(kind):
            times.append(world.elapsed)
            if kind == "throws":
                raise KeyError("bad message")
            if len(times) < 3:
                raise dramatiq.Retry(delay=7000)

        serve(world, broker, handler, policy)
        broker.send("q", "act", ("throws",))
        world.run(broker.idle)
        assert broker.dead_letters[0][1] == "throws KeyError" and times == [0.0]
        broker.send("q", "act", ("retry",))
        world.run(broker.idle)
        assert times[1:] == [0.0, 7.0]


def test_retry_policy_reads_an_actors_options():
    actor = SimpleNamespace(options={"max_retries": 0, "throws": KeyError, "max_age": 60_000})
    policy = RetryPolicy.of_actor(actor)
    assert policy == RetryPolicy(max_retries=0, throws=(KeyError,), max_age_ms=60_000)
    assert RetryPolicy.of_actor(SimpleNamespace(options={})) == RetryPolicy()


def test_broker_worker_skips_messages_older_than_max_age():
    with broker_world() as (world, broker):
        handled: list[str] = []
        broker.send("q", "act", ("stale",), delay_s=90.0)
        serve(world, broker, handled.append, RetryPolicy(max_age_ms=60_000))
        world.run(broker.idle)
        assert handled == [] and broker.stats["act"]["expired"] == 1


def test_broker_refuses_bad_settings():
    with World(0, START) as world, pytest.raises(ValueError, match="duplicate_p"):
        SimBroker(world, duplicate_p=1.5)

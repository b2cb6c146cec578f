"""The simulation's machinery (tests/sim): the scheduler, virtual time, cooperative primitives
and the simulated environment, on toy scenarios. Crashes are in test_sim_crashes.py, the broker
in test_sim_broker.py, the web, invariants and CLI in test_sim_web.py."""

from __future__ import annotations

import inspect
import queue
import threading
import time
import uuid
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

import mongomock
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crawlsched.store.counting import CountingDatabase
from tests.sim.env import SimCounter, SimEnvironment
from tests.sim.ids import seeded_uuids
from tests.sim.kernel import DONE, SimStalled
from tests.sim.world import CrashPolicy, SimFailed, World

START = datetime(2025, 1, 1, tzinfo=UTC)
seeds = st.integers(0, 2**32)


@contextmanager
def world_of(seed: int = 0, policy: CrashPolicy | None = None):
    with World(seed, START, policy) as world:
        yield world


def interleaving(seed: int) -> tuple[str, list[str]]:
    """Four threads that yield, lock, queue and sleep: the trace hash and the order of events."""
    events: list[str] = []
    with world_of(seed) as world:
        p = world.process("p")
        lock, q = world.lock(), world.queue()

        def worker(i: int):
            def run():
                for k in range(5):
                    with lock:
                        events.append(f"{i}.{k}")
                        world.yield_point()
                    q.put(i)
                    world.sleep(0.5 * (i % 2))

            return run

        for i in range(4):
            world.spawn(p, worker(i), f"w{i}")
        world.run()
        return world.trace_hash(), events


# -- the scheduler -------------------------------------------------------------------------------


def test_world_same_seed_same_trace_other_seed_other_trace():
    first, again, other = interleaving(11), interleaving(11), interleaving(12)
    assert first == again
    assert first[0] != other[0]
    assert first[1] != other[1]  # the seed changes the order of events, not only the hash


def test_world_sleeping_an_hour_costs_no_real_time():
    with world_of() as world:
        p = world.process("p")
        woke: list[tuple[float, datetime]] = []
        world.spawn(p, lambda: (world.sleep(3600), woke.append((world.elapsed, world.now()))), "s")
        started = time.perf_counter()
        summary = world.run()
        assert time.perf_counter() - started < 1.0
        assert woke == [(3600.0, START + timedelta(hours=1))]
        assert summary.reason == "quiescent" and summary.virtual_s == 3600.0
        assert world.monotonic() - 3600.0 == pytest.approx(10_000.0)


def test_world_timers_wake_in_deadline_order_and_time_stands_still_while_threads_run():
    with world_of(3) as world:
        p = world.process("p")
        woke: list[tuple[str, float]] = []
        for name, seconds in (("c", 30.0), ("a", 10.0), ("b", 20.0), ("z", 0.0)):

            def sleeper(name=name, seconds=seconds):
                world.sleep(seconds)
                for _ in range(3):
                    world.yield_point()
                woke.append((name, world.elapsed))

            world.spawn(p, sleeper, name)
        world.run()
        assert woke == [("z", 0.0), ("a", 10.0), ("b", 20.0), ("c", 30.0)]


def test_world_run_stops_when_until_holds_and_goes_on_after():
    with world_of(5) as world:
        p, ticks = world.process("p"), []

        def ticker():
            while True:
                world.sleep(1.0)
                ticks.append(world.elapsed)

        world.spawn(p, ticker, "ticker", daemon=True)
        assert world.run(lambda: len(ticks) >= 3).reason == "until"
        assert ticks == [1.0, 2.0, 3.0]
        assert world.run(max_virtual_s=10.5).reason == "max_virtual_s"
        assert ticks[-1] == 13.0
        assert world.run(max_steps=5).reason == "max_steps"


def test_world_reports_a_deadlock_with_what_each_thread_waits_on():
    # Given two threads taking two locks in opposite orders, a yield point between
    found = {}
    for seed in range(30):
        with world_of(seed) as world:
            p = world.process("p")
            a, b = world.lock("lock-a"), world.lock("lock-b")

            def take(first, second):
                with first:
                    world.yield_point()
                    with second:
                        pass

            world.spawn(p, lambda a=a, b=b: take(a, b), "ab")
            world.spawn(p, lambda a=a, b=b: take(b, a), "ba")
            summary = world.run(check=False)
            found.setdefault(summary.reason, summary)
    # Then some seed deadlocks, reported with each thread's wait; others do not
    assert set(found) == {"deadlock", "quiescent"}
    blocked = dict(found["deadlock"].blocked)
    assert blocked == {"p.0/ab": "lock-b (held by p.0/ba)", "p.0/ba": "lock-a (held by p.0/ab)"}
    assert "p.0/ab waits on lock-b" in found["deadlock"].report()


def test_world_run_fails_with_the_traceback_of_a_thread_that_raised():
    with world_of() as world:
        p = world.process("p")

        def broken():
            world.yield_point()
            raise ValueError("the bug")

        world.spawn(p, broken, "broken")
        with pytest.raises(SimFailed, match=r"(?s)p.0/broken raised.*ValueError: the bug"):
            world.run()


def test_world_names_a_thread_that_blocks_its_real_thread():
    # Given a thread blocked on a real lock that a parked simulated thread holds
    real = threading.Lock()
    with world_of() as world:
        p = world.process("p")

        def holder():
            with real:
                world.sleep(1.0)

        def waiter():
            world.yield_point()
            with real:
                pass

        world.spawn(p, holder, "holder")
        world.spawn(p, waiter, "waiter")
        # Then the run stops, naming the thread and where it is stuck
        with pytest.raises(SimStalled, match=r"(?s)waiter made no step.*with real"):
            world.run(stall_s=0.3)


def test_world_hands_the_baton_in_microseconds(capsys):
    with world_of(9) as world:
        p = world.process("p")
        for i in range(8):
            world.spawn(p, lambda: [world.yield_point() for _ in range(5000)], f"t{i}")
        summary = world.run(check_every=10**9)
    with capsys.disabled():
        print(f"\n  baton: {summary.steps_per_s:,.0f} steps/s over 8 threads")
    assert summary.steps == 40_008
    assert summary.steps_per_s > 5_000  # measured ~100k on 2 shared cores


# -- cooperative primitives ----------------------------------------------------------------------


def counter_run(seed: int, locked: bool, threads: int = 4, adds: int = 5) -> int:
    with world_of(seed) as world:
        p, lock, box = world.process("p"), world.lock(), {"n": 0}

        def add():
            for _ in range(adds):
                if locked:
                    lock.acquire()
                n = box["n"]
                world.yield_point()  # read, yield, write: another thread may run between
                box["n"] = n + 1
                if locked:
                    lock.release()

        for i in range(threads):
            world.spawn(p, add, f"adder-{i}")
        world.run()
        return box["n"]


@settings(max_examples=25, deadline=None)
@given(seed=seeds)
def test_sim_lock_never_loses_an_update(seed):
    assert counter_run(seed, locked=True) == 20


def test_unprotected_read_modify_write_loses_updates_for_some_seed():
    totals = {counter_run(seed, locked=False) for seed in range(10)}
    assert min(totals) < 20  # the scheduler interleaves between the read and the write


def test_sim_lock_is_not_reentrant_and_says_so():
    with world_of() as world:
        p, lock = world.process("p"), world.lock("the-lock")
        world.spawn(p, lambda: [lock.acquire(), lock.acquire()], "twice")
        with pytest.raises(SimFailed, match="takes the-lock again"):
            world.run()


def test_sim_condition_wait_times_out_on_virtual_time_or_is_notified():
    with world_of(2) as world:
        p = world.process("p")
        lock = world.lock()
        cond, seen = world.condition(lock), []

        def waiter(timeout):
            with cond:
                seen.append((timeout, cond.wait(timeout), world.elapsed))

        def notifier():
            world.sleep(3.0)
            with cond:
                cond.notify_all()

        world.spawn(p, lambda: waiter(1.0), "short")
        world.spawn(p, lambda: waiter(10.0), "long")
        world.spawn(p, notifier, "notifier")
        world.run()
        assert sorted(seen) == [(1.0, False, 1.0), (10.0, True, 3.0)]


def test_sim_condition_wait_for_and_queue_get_with_timeout():
    with world_of(4) as world:
        p, q = world.process("p"), world.queue()
        lock = world.lock()
        cond, got, box = world.condition(lock), [], {"ready": False}

        def consumer():
            got.append(q.get())
            got.append(q.get())
            with pytest.raises(queue.Empty):
                q.get(timeout=5.0)
            got.append(("empty at", world.elapsed))
            with cond:
                got.append(cond.wait_for(lambda: box["ready"], timeout=100.0))

        def producer():
            world.sleep(2.0)
            q.put("a")
            q.put("b")
            world.sleep(10.0)
            with cond:
                box["ready"] = True
                cond.notify()

        world.spawn(p, consumer, "consumer")
        world.spawn(p, producer, "producer")
        world.run()
        assert got == ["a", "b", ("empty at", 7.0), True]


def test_sim_executor_runs_beside_the_caller_and_first_done_returns_the_first():
    with world_of(6) as world:
        p, env, seen = world.process("p"), None, []
        env = SimEnvironment(world, p)

        def nap(seconds):
            env.sleep(seconds)
            if seconds == 3:
                raise KeyError("three")
            return seconds

        def caller():
            pool = env.executor(2, "lanes")
            futures = [pool.submit(lambda s=s: nap(s)) for s in (5, 2, 3)]
            while futures:
                for done in sorted(env.first_done(futures), key=lambda f: f.seq):
                    futures.remove(done)
                    outcome = repr(done.exception()) if done.exception() else done.result()
                    seen.append((world.elapsed, outcome))
            pool.shutdown(wait=True)

        world.spawn(p, caller, "caller")
        world.run()
        # Two lanes: 5 and 2 start at once, 3 starts when 2 ends (at 2) and fails at 5
        assert seen[0] == (2.0, 2)
        assert set(seen[1:]) == {(5.0, 5), (5.0, "KeyError('three')")}
        assert all(t.state is DONE for t in world._live.values()) and not world._live


# -- the environment ------------------------------------------------------------------------------


def test_sim_environment_has_the_environment_protocols_methods():
    environment = pytest.importorskip("crawlsched.environment")
    for name, member in inspect.getmembers(environment.Environment, inspect.isfunction):
        if name.startswith("_"):
            continue
        ours = getattr(SimEnvironment, name)
        assert list(inspect.signature(ours).parameters) == list(
            inspect.signature(member).parameters
        ), name


def test_sim_counter_counts_store_commands_as_yield_points():
    db = mongomock.MongoClient().db
    with world_of(1) as world:
        p = world.process("p")
        counter = SimCounter(world, p)
        store = CountingDatabase(db, counter)
        store.jobs.insert_one({"_id": 1})  # the test's setup: counted, no step
        steps = world.steps
        world.spawn(
            p, lambda: (store.jobs.find_one({}), store.jobs.update_one({}, {"$set": {"x": 1}})), "t"
        )
        world.run()
        assert counter.boundary == {"insert_one": 1, "find_one": 1, "update_one": 1}
        assert world.steps - steps == 3  # two store steps and the thread's end
        other = world.process("other")
        world.spawn(other, lambda: store.jobs.find_one({}), "intruder")
        with pytest.raises(SimFailed, match="uses the store of p"):
            world.run()


def test_seeded_uuids_replay_from_the_seed_and_restore_uuid4():
    def draw(seed: int) -> list[str]:
        with world_of(seed) as world, seeded_uuids(world):
            return [uuid.uuid4().hex for _ in range(3)]

    real = uuid.uuid4
    assert draw(1) == draw(1) != draw(2)
    assert uuid.uuid4 is real and uuid.UUID(draw(1)[0]).version == 4

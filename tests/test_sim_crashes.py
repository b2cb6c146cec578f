"""Crashes in the simulation (tests/sim/world.py): a process killed between two store writes
keeps exactly the writes before it, its `finally:` blocks write nothing, its blocked threads
unwind, and a restart runs a new generation."""

from __future__ import annotations

from contextlib import contextmanager
from datetime import UTC, datetime

import mongomock
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crawlsched.store.counting import CountingDatabase
from tests.sim.env import SimCounter
from tests.sim.kernel import SimCrash, SimError
from tests.sim.world import CrashPolicy, World

START = datetime(2025, 1, 1, tzinfo=UTC)
seeds = st.integers(0, 2**32)


@contextmanager
def world_of(seed: int = 0, policy: CrashPolicy | None = None):
    with World(seed, START, policy) as world:
        yield world


def transaction(seed: int):
    """A thread writes five documents, then a cleanup in `finally`; a sleeper of the same process
    writes in its own `finally`; a thread of another process writes once after a while. Returns
    the crashes, the ids stored and the ids each thread was about to write, in order."""
    db = mongomock.MongoClient().db
    attempted: list[str] = []
    with world_of(seed, CrashPolicy(0.25, budget=1, processes=("writer",))) as world:
        writer, other = world.process("writer"), world.process("other")
        store = CountingDatabase(db, SimCounter(world))

        def insert(key: str) -> None:
            attempted.append(key)
            store.docs.insert_one({"_id": key})

        def write_five():
            try:
                for i in range(5):
                    insert(str(i))
            finally:
                insert("cleanup")

        def sleeper():
            try:
                world.sleep(60.0)
            finally:
                insert("sleeper")

        world.spawn(writer, write_five, "tx")
        world.spawn(writer, sleeper, "sleeper")
        world.spawn(other, lambda: (world.sleep(1.0), store.others.insert_one({})), "other")
        world.run()
        stored = sorted(db.docs.distinct("_id"))
        return world.crashes, stored, attempted, db.others.count_documents({})


@settings(max_examples=40, deadline=None)
@given(seed=seeds)
def test_crash_keeps_exactly_the_writes_before_it_and_finally_writes_nothing(seed):
    crashes, stored, attempted, others = transaction(seed)
    assert others == 1  # another process is not touched
    if not crashes:
        assert stored == ["0", "1", "2", "3", "4", "cleanup", "sleeper"]
        return
    (crash,) = crashes
    assert crash.process == "writer" and crash.injected and crash.point == "insert_one"
    # Every write before the crash happened, none after it (the `finally:` blocks tried)
    kept = len(stored)
    assert stored == sorted(attempted[:kept]) and kept < len(attempted)
    if crash.thread == "writer.0/tx":
        assert "sleeper" not in stored and "cleanup" not in stored
    else:
        assert crash.thread == "writer.0/sleeper" and attempted[kept:] == ["sleeper"]


def test_crash_found_between_writes_for_some_seed():
    outcomes = {len(transaction(seed)[1]) for seed in range(40)}
    assert 7 in outcomes and any(n < 5 for n in outcomes)


def test_crash_wakes_blocked_threads_and_restart_runs_a_new_generation():
    with world_of(8) as world:
        p, q, ran, unwound = world.process("worker"), world.queue(), [], []
        lock = world.lock()
        cond = world.condition(lock)

        def waits_on_condition():
            try:
                with cond:
                    cond.wait()  # crashed here: leaves the `with` without the lock, quietly
            finally:
                unwound.append(("cond", world.elapsed))

        def gets():
            try:
                ran.append(q.get())
            finally:
                unwound.append(("getter", world.elapsed))

        def boot(process):
            ran.append((process.generation, world.elapsed))
            world.spawn(process, gets, "getter")
            world.spawn(process, waits_on_condition, "cond")

        def killer():
            world.sleep(5.0)
            world.crash(p, "kill -9")

        boot(p)
        world.on_crash(lambda process: world.call_later(2.0, lambda: restart(process)))

        def restart(process):
            world.restart(process)
            boot(process)
            q.put_nowait("for the new generation")

        world.spawn(world.process("killer"), killer, "killer")
        summary = world.run(lambda: len(ran) == 3, check=False)
        assert summary.reason == "until", summary.report()
        assert ran == [(0, 0.0), (1, 7.0), "for the new generation"]
        # The blocked threads of generation 0 unwound when it crashed, at 5 s
        assert sorted(unwound) == [("cond", 5.0), ("getter", 5.0), ("getter", 7.0)]
        assert [(c.process, c.generation, c.virtual_s, c.point) for c in world.crashes] == [
            ("worker", 0, 5.0, "kill -9")
        ]
        assert p.generation == 1 and not p.crashed
        with pytest.raises(SimError, match="has not crashed"):
            world.restart(p)


def test_crashed_thread_raises_at_every_yield_point():
    with world_of() as world:
        p, q, lock, raised = world.process("p"), world.queue(), world.lock(), []

        def dying():
            try:
                world.crash(p)
            except SimCrash:
                raised.append("crash")
            for attempt in (
                world.yield_point, lambda: world.sleep(1), lock.acquire, q.get,
                lambda: world.store_step(None, "find"),
            ):  # fmt: skip
                try:
                    attempt()
                except SimCrash:
                    raised.append("again")

        world.spawn(p, dying, "dying")
        world.run()
        assert raised == ["crash"] + ["again"] * 5

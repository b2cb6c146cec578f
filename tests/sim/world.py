"""A deterministic world: simulated processes, their threads, a virtual clock and crashes.

    world = World(seed=7, start=datetime(2025, 1, 1, tzinfo=UTC))
    worker = world.process("worker-1")
    world.spawn(worker, loop, "loop")
    summary = world.run(until=lambda: done, max_virtual_s=3600, max_steps=100_000)

Threads are real threads run one at a time (`kernel.py`); they yield at the world's calls
(`yield_point`, `store_step`, `sleep`, the cooperative lock, condition, queue, executor and
futures of `sync.py`) and nowhere else, so code between two yield points is atomic. A process
is crashed at a store write (instead of the write) with the probability and within the budget of
`crash_policy`; its threads then unwind with `SimCrash`, and `restart` gives it a new
generation whose threads the caller spawns again.

Run the simulation with `PYTHONHASHSEED=0`: the code under test may iterate sets of strings.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from tests.sim import sync
from tests.sim.kernel import (
    BLOCKED,
    CRASHED,
    DONE,
    TIMED_OUT,
    Failure,
    Scheduler,
    SimCrash,
    SimError,
    SimProcess,
    SimThread,
)

# Collection methods that write: a crash is injected instead of one of these.
WRITES = frozenset(
    {
        "insert_one",
        "insert_many",
        "update_one",
        "update_many",
        "replace_one",
        "delete_one",
        "delete_many",
        "bulk_write",
        "find_one_and_update",
        "find_one_and_replace",
        "find_one_and_delete",
    }
)
MONOTONIC_ORIGIN = 10_000.0  # world.monotonic() at the start: no code may take 0 for "never"


@dataclass(frozen=True)
class CrashPolicy:
    """When the world kills a process by itself: at a crash point of kind in `points` ("write":
    a store write; "send", "ack": the broker's), with `probability`, at most `budget` times in
    the world's life, only processes named in `processes` (None: any)."""

    probability: float = 0.0
    budget: int = 0
    points: frozenset[str] = frozenset({"write"})
    processes: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if not 0.0 <= self.probability <= 1.0:
            raise ValueError(f"probability must be within [0, 1], got {self.probability}")
        if self.budget < 0:
            raise ValueError(f"budget must be >= 0, got {self.budget}")


@dataclass(frozen=True)
class CrashRecord:
    process: str
    generation: int
    virtual_s: float
    step: int
    point: str  # the method or step it replaced ("update_one", "send:plan_crawls", "manual")
    thread: str | None  # the thread that was running (None: crashed from the test's thread)
    injected: bool  # drawn by the crash policy (else asked for with `world.crash`)


@dataclass(frozen=True)
class RunSummary:
    """How a `run` ended. `reason`: "until" (the condition held), "quiescent" (nothing left to
    run and no timer), "deadlock" (a non-daemon thread blocked forever), "failed" (a thread
    raised), "max_steps", "max_virtual_s"."""

    reason: str
    steps: int
    virtual_s: float
    real_s: float
    crashes: tuple[CrashRecord, ...]
    failures: tuple[Failure, ...]
    blocked: tuple[tuple[str, str], ...]  # (thread, what it waits on), at the end
    trace_hash: str

    @property
    def failed(self) -> bool:
        return self.reason in ("failed", "deadlock")

    @property
    def steps_per_s(self) -> float:
        return self.steps / self.real_s if self.real_s > 0 else 0.0

    def report(self) -> str:
        lines = [f"run ended: {self.reason} after {self.steps} steps, {self.virtual_s:.3f} s"]
        lines += [f"--- {f.thread} raised at step {f.step}:\n{f.traceback}" for f in self.failures]
        if self.reason == "deadlock":
            lines += [f"  {name} waits on {what}" for name, what in self.blocked]
        return "\n".join(lines)


class SimFailed(AssertionError):
    def __init__(self, summary: RunSummary) -> None:
        super().__init__(summary.report())
        self.summary = summary


@dataclass
class _Books:
    """What the world remembers of processes and crashes."""

    processes: dict[str, SimProcess] = field(default_factory=dict)
    crashes: list[CrashRecord] = field(default_factory=list)
    injected: int = 0
    listeners: list[Callable[[SimProcess], None]] = field(default_factory=list)
    names: Counter = field(default_factory=Counter)


class World(Scheduler):
    def __init__(self, seed: int, start: datetime, crash_policy: CrashPolicy | None = None):
        if start.tzinfo is None:
            raise ValueError("start must be an aware datetime")
        super().__init__(seed)
        self.start = start
        self.crash_policy = crash_policy or CrashPolicy()
        self._faults = random.Random(f"{seed}:faults")
        self._books = _Books()

    # -- time and randomness -------------------------------------------------------------------

    def now(self) -> datetime:
        return self.start + timedelta(seconds=self._vt)

    def monotonic(self) -> float:
        return MONOTONIC_ORIGIN + self._vt

    @property
    def elapsed(self) -> float:
        """Virtual seconds since the start."""
        return self._vt

    @property
    def steps(self) -> int:
        return self._steps

    def rng(self, name: str) -> random.Random:
        """A random stream of its own for `name`, from the world's seed: drawing from it does
        not change the schedule."""
        return random.Random(f"{self.seed}:{name}")

    # -- processes and threads -----------------------------------------------------------------

    def process(self, name: str) -> SimProcess:
        if name in self._books.processes:
            raise SimError(f"a process named {name!r} exists")
        process = self._books.processes[name] = SimProcess(name)
        return process

    @property
    def processes(self) -> list[SimProcess]:
        return list(self._books.processes.values())

    def spawn(
        self, process: SimProcess, fn: Callable[[], object], name: str, daemon: bool = False
    ) -> SimThread:
        """A thread of `process` running `fn()`; it runs when the scheduler first picks it. A
        daemon thread blocked forever at the end (an idle worker) is no deadlock."""
        full = f"{process.name}.{process.generation}/{name}"
        self._books.names[full] += 1
        if self._books.names[full] > 1:
            full = f"{full}#{self._books.names[full]}"
        t = SimThread(process, fn, full, self.next_seq())
        t.daemon = daemon
        self._live[t.seq] = t
        self._make_runnable(t)
        threading.Thread(target=self._thread_main, args=(t,), name=full, daemon=True).start()
        return t

    def join(self, thread: SimThread, timeout: float | None = None) -> bool:
        """Wait until `thread` ends; False if the timeout ran out first."""
        while thread.state is not DONE:
            cur = self._running("join")
            thread.joiners.append(cur)
            try:
                if self.block(f"join {thread.name}", timeout, "join") is TIMED_OUT:
                    return False
            finally:
                thread.joiners.remove(cur)
        return True

    def blocked(self) -> tuple[tuple[str, str], ...]:
        return tuple((t.name, t.waiting_on) for t in self._live.values() if t.state is BLOCKED)

    # -- crashes -------------------------------------------------------------------------------

    def on_crash(self, listener: Callable[[SimProcess], None]) -> None:
        """Call `listener(process)` at each crash, with the baton held (it must not block; it
        may spawn threads and set callbacks, e.g. a restart `call_later`)."""
        self._books.listeners.append(listener)

    @property
    def crashes(self) -> list[CrashRecord]:
        return list(self._books.crashes)

    def crash(self, process: SimProcess, point: str = "manual", injected: bool = False) -> None:
        """Kill `process` now: its blocked threads wake to unwind, the others raise SimCrash
        when next run; so does the caller, when it is one of them."""
        if process.crashed:
            return
        process.crashed = True
        cur = self.current()
        self._books.crashes.append(
            CrashRecord(
                process.name, process.generation, self._vt, self._steps, point,
                cur.name if cur else None, injected,
            )
        )  # fmt: skip
        for t in list(self._live.values()):
            if t.process is process:
                self.wake(t, CRASHED)
        for listener in self._books.listeners:
            listener(process)
        if cur is not None and cur.process is process:
            raise SimCrash(f"{process.name} crashed at {point}")

    def restart(self, process: SimProcess) -> SimProcess:
        """A crashed process comes back as a new generation (no thread: spawn them again)."""
        if not process.crashed:
            raise SimError(f"{process.name} has not crashed")
        process.generation += 1
        process.crashed = False
        return process

    def _maybe_crash(self, cur: SimThread, point: str, what: str) -> None:
        policy = self.crash_policy
        if point not in policy.points or self._books.injected >= policy.budget:
            return
        if policy.processes is not None and cur.process.name not in policy.processes:
            return
        if self._faults.random() < policy.probability:
            self._books.injected += 1
            self.crash(cur.process, what, injected=True)

    # -- yield points --------------------------------------------------------------------------

    def yield_point(self, kind: str = "yield") -> None:
        """Let the scheduler pick who runs next (maybe the caller)."""
        self.step(kind)

    def fault_point(self, kind: str, point: str) -> None:
        """A yield point where the crash policy may kill the caller's process (of kind `point`),
        instead of what the caller does next. Nothing outside a simulated thread."""
        cur = self.current()
        if cur is None:
            return
        self.step(kind)
        self._maybe_crash(cur, point, kind)

    def store_step(self, process: SimProcess | None, method: str) -> None:
        """Before a store command: a yield point; before a write, maybe a crash instead.
        `process` None: the running thread's. Nothing outside a simulated thread (a test's
        setup writing to the store)."""
        cur = self.current()
        if cur is None:
            return
        if process is not None and process is not cur.process:
            raise SimError(f"{cur.name} uses the store of {process.name}")
        self.step(f"store:{method}")
        if method in WRITES:
            self._maybe_crash(cur, "write", method)

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            self.block("sleep", seconds, "sleep")
        else:
            self.step("sleep")

    # -- cooperative primitives (sync.py) ------------------------------------------------------

    def lock(self, name: str = "lock") -> sync.SimLock:
        return sync.SimLock(self, name)

    def condition(self, lock: sync.SimLock, name: str = "condition") -> sync.SimCondition:
        return sync.SimCondition(self, lock, name)

    def queue(self, name: str = "queue") -> sync.SimQueue:
        return sync.SimQueue(self, name)

    def executor(
        self, width: int, name: str, process: SimProcess | None = None
    ) -> sync.SimExecutor:
        """`width` threads beside the caller's, in the caller's process (or `process`)."""
        if process is None:
            process = self._running("executor() without a process").process
        return sync.SimExecutor(self, process, width, name)

    def first_done(self, pending: Iterable[sync.SimFuture]) -> set[sync.SimFuture]:
        return sync.first_done(self, pending)

    # -- running -------------------------------------------------------------------------------

    def run(
        self,
        until: Callable[[], bool] = lambda: False,
        *,
        max_virtual_s: float = float("inf"),
        max_steps: int = 10_000_000,
        check_every: int = 100,
        stall_s: float = 30.0,
        check: bool = True,
    ) -> RunSummary:
        """Run from the test's thread until `until()` holds (asked every `check_every` steps and
        at the end of each instant, before time moves, with every simulated thread parked: it
        may read anything, and must not call the world's yield points), quiescence, a failure
        or a bound (both counted from this call). Raises SimFailed when a thread raised or a
        deadlock was found, unless `check` is false; SimStalled when a thread blocks the real
        thread it runs on."""
        if self.current() is not None:
            raise SimError("run() is for the test's thread")
        if check_every < 1:
            raise ValueError(f"check_every must be >= 1, got {check_every}")
        steps0, vt0, crashes0 = self._steps, self._vt, len(self._books.crashes)
        failures0, t0 = len(self._failures), time.perf_counter()
        self._max_steps = self._steps + max_steps
        self._vt_limit = self._vt + max_virtual_s
        self._check_every = check_every
        self._check_at = self._steps + check_every
        reason = self._drive(until, stall_s)
        summary = RunSummary(
            reason,
            self._steps - steps0,
            self._vt - vt0,
            time.perf_counter() - t0,
            tuple(self._books.crashes[crashes0:]),
            tuple(self._failures[failures0:]),
            self.blocked(),
            self.trace_hash(),
        )
        if check and summary.failed:
            raise SimFailed(summary)
        return summary

    def close(self, stall_s: float = 5.0) -> None:
        """Unwind every thread left (each raises SimShutdown at its next yield point), one at a
        time. Their real threads are daemons: one that does not unwind is left behind."""
        if self._closing or self.current() is not None:
            return
        self._closing = True
        for t in list(self._live.values()):
            if t.state is DONE:
                continue
            self._hand(t)
            try:
                self._await_baton(stall_s)
            except SimError:
                return

    def __enter__(self) -> World:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

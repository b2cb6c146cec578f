"""The baton: real threads that run one at a time, in an order drawn from a seed.

Every simulated thread is a `threading.Thread` parked on its own gate (a `threading.Lock` held
while it waits). Exactly one holds the baton. At a yield point the holder draws the next thread
from the seeded `random.Random`, opens that thread's gate and parks on its own: one OS context
switch per step, no thread in between. The test's thread (the controller) is handed the baton
back only to check its condition or when the run must stop.

Virtual time advances only when no thread is runnable: it jumps to the earliest live timer. A
timer either wakes a blocked thread (a sleep, a wait with a timeout) or runs a callback (a
delayed message becoming ready), always with the baton held, so callbacks must not block.

Nothing here may iterate a set or anything ordered by `id()`: the order of steps must depend on
the seed alone. Threads and futures hash by their creation number for the same reason.
"""

from __future__ import annotations

import hashlib
import heapq
import random
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass

RUNNABLE, BLOCKED, DONE = "runnable", "blocked", "done"


class _Signal:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


TIMED_OUT = _Signal("TIMED_OUT")  # what `block` returns when its timeout ran out
CRASHED = _Signal("CRASHED")  # the wake value of a thread woken because its process crashed


class SimCrash(BaseException):
    """The thread's process was killed (kill -9): raised instead of what it was about to do.
    A BaseException, so `except Exception` handlers in the code under test do not swallow it."""


class SimShutdown(BaseException):
    """The world is being torn down: every thread unwinds."""


class SimError(RuntimeError):
    """The simulation was used in a way it cannot simulate (a misuse, not a finding)."""


class SimStalled(SimError):
    """The thread holding the baton made no step for too long in real time: it is blocked on
    something the world does not simulate (a `threading.Lock` held by a parked thread, real
    I/O) or loops without a yield point."""


class SimProcess:
    """A group of threads that crash together. `generation` counts restarts: a thread spawned
    in an earlier generation is dead for good."""

    __slots__ = ("crashed", "generation", "name")

    def __init__(self, name: str) -> None:
        self.name = name
        self.generation = 0
        self.crashed = False

    def __repr__(self) -> str:
        state = "crashed" if self.crashed else "up"
        return f"SimProcess({self.name!r}, generation={self.generation}, {state})"


class SimThread:
    __slots__ = (
        "daemon",
        "fn",
        "gate",
        "generation",
        "ident",
        "index",
        "joiners",
        "name",
        "process",
        "seq",
        "state",
        "token",
        "waiting_on",
        "wake_value",
    )

    def __init__(self, process: SimProcess, fn: Callable[[], object], name: str, seq: int):
        self.process, self.fn, self.name, self.seq = process, fn, name, seq
        self.generation = process.generation
        self.daemon = False  # blocked forever at the end is quiescence, not a deadlock
        self.gate = threading.Lock()
        self.gate.acquire()  # held while the thread is parked
        self.state = RUNNABLE
        self.index = -1  # its place in the runnable list
        self.token = 0  # bumped at each wake: a timer of an older wait is stale
        self.waiting_on = ""
        self.wake_value: object = None
        self.joiners: list[SimThread] = []
        self.ident: int | None = None

    def __hash__(self) -> int:
        return self.seq

    def __repr__(self) -> str:
        return f"SimThread({self.name!r}, {self.state})"

    @property
    def dead(self) -> bool:
        return self.process.crashed or self.generation != self.process.generation


@dataclass(frozen=True)
class Failure:
    thread: str
    step: int
    virtual_s: float
    traceback: str


class Scheduler:
    """The baton, the runnable threads, the timers and the virtual clock (see the module)."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self._rng = random.Random(f"{seed}:schedule")
        self._vt = 0.0
        self._timers: list[tuple] = []  # (deadline, seq, thread | None, token, callback)
        self._timer_seq = 0
        self._runnable: list[SimThread] = []
        self._live: dict[int, SimThread] = {}  # by seq, in creation order
        self._local = threading.local()
        self._steps = 0
        self._hash = hashlib.blake2b(digest_size=16)
        self._controller = threading.Lock()
        self._controller.acquire()
        self._holder: SimThread | None = None
        self._stop: str | None = None
        self._closing = False
        self._failures: list[Failure] = []
        self._seq = 0
        self._quiet_checked = False  # the controller has seen this instant's end
        # Bounds of the current run (set by `run`).
        self._max_steps = sys.maxsize
        self._vt_limit = float("inf")
        self._check_every = 100
        self._check_at = sys.maxsize

    # -- who runs ------------------------------------------------------------------------------

    def current(self) -> SimThread | None:
        """The running simulated thread, or None in any other thread (the test's)."""
        return getattr(self._local, "thread", None)

    def _running(self, what: str) -> SimThread:
        cur = self.current()
        if cur is None:
            raise SimError(f"{what} outside a simulated thread")
        return cur

    def _check_alive(self, cur: SimThread) -> None:
        if self._closing:
            raise SimShutdown
        if cur.dead:
            raise SimCrash(f"{cur.process.name} crashed")

    def _make_runnable(self, t: SimThread) -> None:
        t.state = RUNNABLE
        t.index = len(self._runnable)
        self._runnable.append(t)

    def _drop_runnable(self, t: SimThread) -> None:
        if t.index < 0:
            return  # not runnable (a blocked thread unwinding at close)
        last = self._runnable.pop()
        if last is not t:
            self._runnable[t.index] = last
            last.index = t.index
        t.index = -1

    def next_seq(self) -> int:
        """A number for a new thread or future: the same in every run of the seed (hash by it,
        never by id())."""
        self._seq += 1
        return self._seq

    def choice(self, items: list):
        """One of `items`, drawn from the schedule's stream (for wake-ups among waiters)."""
        return items[self._rng.randrange(len(items))] if len(items) > 1 else items[0]

    # -- blocking and waking -------------------------------------------------------------------

    def block(self, waiting_on: str, timeout: float | None = None, kind: str = "block") -> object:
        """Park the running thread until `wake(thread, value)` (returns value) or `timeout`
        virtual seconds (returns TIMED_OUT). Raises SimCrash if its process crashed."""
        cur = self._running(kind)
        self._check_alive(cur)
        self._drop_runnable(cur)
        cur.state, cur.waiting_on, cur.wake_value = BLOCKED, waiting_on, None
        if timeout is not None:
            self._push_timer(self._vt + max(0.0, timeout), cur, cur.token, None)
        self._yield(cur, kind)
        self._check_alive(cur)
        return cur.wake_value

    def wake(self, t: SimThread, value: object = None) -> bool:
        """Make a blocked thread runnable; False if it was not blocked."""
        if t.state is not BLOCKED:
            return False
        t.token += 1
        t.wake_value, t.waiting_on = value, ""
        self._make_runnable(t)
        return True

    def call_later(self, delay_s: float, callback: Callable[[], None]) -> None:
        """Run `callback` (with the baton held: it must not block) `delay_s` virtual seconds
        from now. A pending callback keeps the world from being quiescent."""
        self._push_timer(self._vt + max(0.0, delay_s), None, 0, callback)

    def _push_timer(self, deadline: float, thread, token: int, callback) -> None:
        self._timer_seq += 1
        heapq.heappush(self._timers, (deadline, self._timer_seq, thread, token, callback))

    # -- the hand-off --------------------------------------------------------------------------

    def step(self, kind: str) -> None:
        """A yield point of the running thread."""
        cur = self._running(kind)
        self._check_alive(cur)
        self._yield(cur, kind)
        self._check_alive(cur)

    def _yield(self, cur: SimThread, kind: str) -> None:
        self._steps += 1
        nxt = self._pick()
        self._hash.update(f"{self._steps}|{cur.name}|{kind}|{nxt.name if nxt else ''}".encode())
        if nxt is cur:
            return
        ending = cur.state is DONE  # read before the hand-off: then another thread runs
        self._hand(nxt)
        if not ending:
            cur.gate.acquire()  # parked until someone hands it the baton again

    def _hand(self, nxt: SimThread | None) -> None:
        self._holder = nxt
        (self._controller if nxt is None else nxt.gate).release()

    def _pick(self) -> SimThread | None:
        """Who runs next: a runnable thread, or None for the controller (`_stop` says why)."""
        if self._stop is not None or self._closing:
            return None
        if self._steps >= self._max_steps:
            self._stop = "max_steps"
            return None
        if self._steps >= self._check_at:
            self._check_at = self._steps + self._check_every
            self._stop = "check"
            return None
        if not self._runnable:
            if not self._quiet_checked:  # the end of an instant: the controller checks first
                self._quiet_checked, self._stop = True, "check"
                return None
            self._quiet_checked = False
            if not self._advance():
                return None
        self._quiet_checked = False
        return self.choice(self._runnable)

    def _advance(self) -> bool:
        """Jump to the earliest live timer and fire every timer due then: True when a thread
        became runnable, else False with `_stop` saying why the run ends."""
        timers = self._timers
        while timers:
            deadline, _, thread, token, callback = timers[0]
            if thread is not None and (thread.token != token or thread.state is not BLOCKED):
                heapq.heappop(timers)  # its thread was woken otherwise meanwhile
                continue
            if deadline > self._vt_limit:
                self._stop = "max_virtual_s"
                return False
            heapq.heappop(timers)
            self._vt = max(self._vt, deadline)
            if thread is not None:
                self.wake(thread, TIMED_OUT)
            else:
                callback()
            if self._runnable and (not timers or timers[0][0] > self._vt):
                return True
        if self._runnable:
            return True
        blocked = any(t.state is BLOCKED and not t.daemon for t in self._live.values())
        self._stop = "deadlock" if blocked else "quiescent"
        return False

    # -- threads -------------------------------------------------------------------------------

    def _thread_main(self, t: SimThread) -> None:
        t.gate.acquire()  # the first baton
        t.ident = threading.get_ident()
        self._local.thread = t
        kind = "exit"
        try:
            self._check_alive(t)
            t.fn()
        except SimCrash:
            kind = "crashed"
        except SimShutdown:
            kind = "shutdown"
        except BaseException:
            kind = "failed"
            self._failures.append(Failure(t.name, self._steps, self._vt, traceback.format_exc()))
            self._stop = "failed"
        self._drop_runnable(t)
        t.state = DONE
        del self._live[t.seq]
        for joiner in t.joiners:
            self.wake(joiner)
        self._yield(t, kind)  # hands the baton on; the real thread then ends

    # -- the controller ------------------------------------------------------------------------

    def _drive(self, until: Callable[[], bool], stall_s: float) -> str:
        """From the test's thread: run until `until()` at a check, or a stop other than a check.
        `until` is asked before the first step, every `check_every` steps and at the end of
        each instant (before virtual time moves, and at quiescence), always with every
        simulated thread parked."""
        while True:
            self._stop = None
            if until():
                return "until"
            nxt = self._pick()
            if nxt is not None:
                self._hand(nxt)
                self._await_baton(stall_s)
            if self._stop != "check":
                return str(self._stop)

    def _await_baton(self, stall_s: float) -> None:
        seen, since = self._steps, time.monotonic()
        while not self._controller.acquire(timeout=min(1.0, stall_s)):
            if self._steps != seen:
                seen, since = self._steps, time.monotonic()
            elif time.monotonic() - since >= stall_s:
                self._closing = True  # the world is broken: whatever runs later stops at once
                raise SimStalled(self._stall_report(stall_s))

    def _stall_report(self, stall_s: float) -> str:
        holder = self._holder
        if holder is None:
            return f"no step for {stall_s} s, and no simulated thread holds the baton"
        frame = sys._current_frames().get(holder.ident or -1)
        stack = "".join(traceback.format_stack(frame)) if frame else "(not started)"
        return f"{holder.name} made no step for {stall_s} s (real time); it is at:\n{stack}"

    def trace_hash(self) -> str:
        """A hash over (step, thread, kind, next thread) of every step so far."""
        return self._hash.hexdigest()

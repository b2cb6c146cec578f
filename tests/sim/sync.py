"""Cooperative lock, condition, queue, futures and executor over the world's scheduler.

They keep `threading`'s and `concurrent.futures`' semantics (what `crawlsched.environment`
asks of its environment) but wait by parking the simulated thread, with timeouts on the
virtual clock. Taking a lock, waiting, putting and getting are yield points. Which waiter gets
a released lock or a notify is drawn from the schedule's seed, not first come first served:
Python promises no order, and code that relies on one is a finding.

A thread of a crashed process raises SimCrash at any of these at once (a `finally:` that takes a
lock does nothing), and a crashed thread that unwinds out of a `with lock:` it no longer holds
(it was waiting on a condition) releases nothing.
"""

from __future__ import annotations

import queue
from collections import deque
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from tests.sim.kernel import DONE, TIMED_OUT, SimCrash, SimError, SimProcess, SimThread

if TYPE_CHECKING:
    from tests.sim.world import World

_OUTSIDE = object()  # the owner of a lock taken by the test's thread (outside the simulation)


class SimLock:
    def __init__(self, world: World, name: str = "lock") -> None:
        self._world, self.name = world, name
        self._owner: object = None
        self._waiters: list[SimThread] = []

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        world = self._world
        cur = world.current()
        if cur is None:  # the test's own setup: it may take a free lock, never wait
            if self._owner is None:
                self._owner = _OUTSIDE
                return True
            raise SimError(f"the test's thread cannot wait for {self.name}")
        world.step("lock")
        if self._owner is None:
            self._owner = cur
            return True
        if self._owner is cur:
            raise SimError(f"{cur.name} takes {self.name} again (it is not reentrant)")
        if not blocking:
            return False
        self._waiters.append(cur)
        try:
            holder = getattr(self._owner, "name", "the test")
            woke = world.block(f"{self.name} (held by {holder})", None if timeout < 0 else timeout)
        except BaseException:
            if self._owner is cur:  # handed over, then crashed before it could use it
                self._release()
            raise
        finally:
            if cur in self._waiters:
                self._waiters.remove(cur)
        return woke is not TIMED_OUT

    def release(self) -> None:
        cur = self._world.current()
        if cur is not None and cur.dead and self._owner is not cur:
            return  # a crashed thread leaving a `with` it no longer holds
        if self._owner is None:
            raise RuntimeError(f"release of {self.name}, which is not held")
        self._release()

    def _release(self) -> None:
        if self._waiters:
            heir = self._world.choice(self._waiters)
            self._waiters.remove(heir)
            self._owner = heir
            self._world.wake(heir)
        else:
            self._owner = None

    def locked(self) -> bool:
        return self._owner is not None

    def held_by_caller(self) -> bool:
        cur = self._world.current()
        return self._owner is (cur if cur is not None else _OUTSIDE)

    def __enter__(self) -> SimLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class SimCondition:
    def __init__(self, world: World, lock: SimLock, name: str = "condition") -> None:
        if not isinstance(lock, SimLock):
            raise SimError(f"a simulated condition needs a simulated lock, got {lock!r}")
        self._world, self._lock, self.name = world, lock, name
        self._waiters: list[SimThread] = []

    def __enter__(self) -> SimCondition:
        self._lock.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self._lock.release()

    def wait(self, timeout: float | None = None) -> bool:
        """As `threading.Condition.wait`: False when the timeout ran out. A crashed thread
        raises SimCrash without taking the lock back."""
        world = self._world
        cur = world._running("wait")
        if not self._lock.held_by_caller():
            raise RuntimeError(f"wait on {self.name} without holding its lock")
        self._lock.release()
        self._waiters.append(cur)
        try:
            woke = world.block(self.name, timeout, "wait")
        finally:
            if cur in self._waiters:
                self._waiters.remove(cur)
        self._lock.acquire()
        return woke is not TIMED_OUT

    def wait_for(self, predicate: Callable[[], Any], timeout: float | None = None) -> Any:
        deadline = None if timeout is None else self._world.elapsed + timeout
        result = predicate()
        while not result:
            left = None if deadline is None else deadline - self._world.elapsed
            if left is not None and left <= 0:
                break
            self.wait(left)
            result = predicate()
        return result

    def notify(self, n: int = 1) -> None:
        self._check_held("notify")
        for _ in range(min(n, len(self._waiters))):
            waiter = self._world.choice(self._waiters)
            self._waiters.remove(waiter)
            self._world.wake(waiter)

    def notify_all(self) -> None:
        self._check_held("notify_all")
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            self._world.wake(waiter)

    def _check_held(self, what: str) -> None:
        if not self._lock.held_by_caller():
            raise RuntimeError(f"{what} on {self.name} without holding its lock")


class SimQueue:
    """An unbounded FIFO queue (`queue.Queue`'s put/get with timeouts)."""

    def __init__(self, world: World, name: str = "queue") -> None:
        self._world, self.name = world, name
        self._items: deque = deque()
        self._getters: list[SimThread] = []

    def put(self, item: Any, block: bool = True, timeout: float | None = None) -> None:
        if self._world.current() is not None:
            self._world.step("queue.put")
        self.put_nowait(item)

    def put_nowait(self, item: Any) -> None:
        self._items.append(item)
        getters, self._getters = self._getters, []  # each checks again: one may have crashed
        for getter in getters:
            self._world.wake(getter)

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        world = self._world
        cur = world.current()
        if cur is None:
            return self._items.popleft() if self._items else self._empty()
        world.step("queue.get")
        deadline = None if timeout is None else world.elapsed + timeout
        while not self._items:
            left = None if deadline is None else deadline - world.elapsed
            if not block or (left is not None and left <= 0):
                self._empty()
            self._getters.append(cur)
            try:
                world.block(f"get from {self.name}", left, "queue.get")
            finally:
                if cur in self._getters:
                    self._getters.remove(cur)
        return self._items.popleft()

    def get_nowait(self) -> Any:
        return self.get(block=False)

    def _empty(self) -> Any:
        raise queue.Empty

    def qsize(self) -> int:
        return len(self._items)

    def empty(self) -> bool:
        return not self._items


class SimFuture:
    """Work started on a SimExecutor (`concurrent.futures.Future`'s subset). Hashes by its
    creation number, so a set of futures iterates in the same order in every run."""

    def __init__(self, world: World) -> None:
        self._world, self.seq = world, world.next_seq()
        self._done = False
        self._result: Any = None
        self._exception: BaseException | None = None
        self._waiters: list[SimThread] = []
        self._callbacks: list[Callable[[SimFuture], None]] = []

    def __hash__(self) -> int:
        return self.seq

    def done(self) -> bool:
        return self._done

    def cancel(self) -> bool:
        return False

    def result(self, timeout: float | None = None) -> Any:
        self._wait(timeout)
        if self._exception is not None:
            raise self._exception
        return self._result

    def exception(self, timeout: float | None = None) -> BaseException | None:
        self._wait(timeout)
        return self._exception

    def add_done_callback(self, fn: Callable[[SimFuture], None]) -> None:
        if self._done:
            fn(self)
        else:
            self._callbacks.append(fn)

    def _wait(self, timeout: float | None) -> None:
        if self._done:
            return
        cur = self._world._running("waiting for a future")
        self._waiters.append(cur)
        try:
            if self._world.block("a future", timeout, "future") is TIMED_OUT and not self._done:
                raise TimeoutError("future not done")
        finally:
            if cur in self._waiters:
                self._waiters.remove(cur)

    def set_result(self, value: Any) -> None:
        self._result = value
        self._finish()

    def set_exception(self, exc: BaseException) -> None:
        self._exception = exc
        self._finish()

    def _finish(self) -> None:
        self._done = True
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            self._world.wake(waiter)
        for fn in self._callbacks:
            fn(self)


def first_done(world: World, pending: Iterable[SimFuture]) -> set[SimFuture]:
    """Wait until one of `pending` is done; those done (`concurrent.futures.wait`, first)."""
    futures = list(pending)
    if not futures:
        return set()
    cur = world._running("first_done")
    world.step("first_done")
    while True:
        done = {f for f in futures if f.done()}
        if done:
            return done
        for f in futures:
            f._waiters.append(cur)
        try:
            world.block(f"first of {len(futures)} futures", None, "first_done")
        finally:
            for f in futures:
                if cur in f._waiters:
                    f._waiters.remove(cur)


_STOP = object()


class SimExecutor:
    """Up to `width` threads of `process`, started as work comes (as ThreadPoolExecutor)."""

    def __init__(self, world: World, process: SimProcess, width: int, name: str) -> None:
        if width < 1:
            raise ValueError(f"width must be >= 1, got {width}")
        self._world, self._process, self.width, self.name = world, process, width, name
        self._tasks = SimQueue(world, f"{name} tasks")
        self._workers: list[SimThread] = []
        self._shut = False

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> SimFuture:
        if self._shut:
            raise RuntimeError(f"submit to {self.name} after shutdown")
        future = SimFuture(self._world)
        self._tasks.put_nowait((fn, args, kwargs, future))
        if len(self._workers) < self.width:
            name = f"{self.name}-{len(self._workers)}"
            self._workers.append(self._world.spawn(self._process, self._work, name, daemon=True))
        return future

    def _work(self) -> None:
        while True:
            task = self._tasks.get()
            if task is _STOP:
                return
            fn, args, kwargs, future = task
            try:
                value = fn(*args, **kwargs)
            except SimCrash:
                raise
            except BaseException as e:  # as concurrent.futures: the caller reads it
                future.set_exception(e)
            else:
                future.set_result(value)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        if not self._shut:
            self._shut = True
            for _ in self._workers:
                self._tasks.put_nowait(_STOP)
        if wait and self._world.current() is not None:
            for worker in self._workers:
                if worker.state is not DONE:
                    self._world.join(worker)

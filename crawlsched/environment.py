"""What the crawl core takes from its process instead of reaching for it: time, sleep, locks,
threads. `SystemEnvironment` is the real one; the test suite's simulation hands in another,
under which one thread runs many simulated worker processes on a simulated clock, crashes them
between any two store writes and replays a failure from its seed (FoundationDB's and
TigerBeetle's way of testing a core this intricate).

So code that decides when and where work runs reads `env.now()` and `env.monotonic()`, never
`datetime.now()` or `time.monotonic()`; waits with `env.sleep()` or on `env.condition()`;
locks with `env.lock()`; and runs work beside itself on `env.executor()`.
"""

from __future__ import annotations

import concurrent.futures
import random
import threading
import time
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

T = TypeVar("T")


class Condition(Protocol):
    """`threading.Condition`'s subset the core uses (held through its lock)."""

    def wait(self, timeout: float | None = None) -> bool: ...

    def notify_all(self) -> None: ...


class Done(Protocol):
    """A piece of work started on an executor (`concurrent.futures.Future`'s subset)."""

    def done(self) -> bool: ...

    def result(self) -> Any: ...


class Executor(Protocol):
    def submit(self, fn: Callable[[], T]) -> Done: ...

    def shutdown(self, wait: bool = True) -> None: ...


class Environment(Protocol):
    random: random.Random  # what the core draws (a backoff's jitter): seeded in a simulation

    def now(self) -> datetime:
        """The wall clock, aware, in UTC."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back (durations, ages)."""
        ...

    def sleep(self, seconds: float) -> None: ...

    def lock(self) -> AbstractContextManager[Any]: ...

    def condition(self, lock: AbstractContextManager[Any]) -> Condition: ...

    def executor(self, width: int, name: str) -> Executor:
        """`width` threads for work beside the caller's (a batch's lanes)."""
        ...

    def first_done(self, pending: Iterable[Done]) -> set[Done]:
        """Wait until one of `pending` is done; those done."""
        ...

    def draining(self) -> bool:
        """Whether this process was told to stop (SIGTERM): a batch then starts no page, lets
        those in flight finish, records them and gives the rest back to wait."""
        ...


class _Executor:
    def __init__(self, width: int, name: str) -> None:
        self._pool = concurrent.futures.ThreadPoolExecutor(width, thread_name_prefix=name)

    def submit(self, fn: Callable[[], T]) -> Done:
        return self._pool.submit(fn)

    def shutdown(self, wait: bool = True) -> None:
        self._pool.shutdown(wait=wait)


class SystemEnvironment:
    """The process's own clock, randomness and threads."""

    def __init__(self) -> None:
        self.random = random.Random()
        # Set once, by the worker's drain on SIGTERM (`brokers/drain.py`); read by every batch
        # thread: an Event, the one thing here that crosses threads.
        self._draining = threading.Event()

    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)

    def lock(self) -> AbstractContextManager[Any]:
        return threading.Lock()

    def condition(self, lock: AbstractContextManager[Any]) -> Condition:
        return threading.Condition(lock)  # type: ignore[arg-type]

    def executor(self, width: int, name: str) -> Executor:
        return _Executor(width, name)

    def first_done(self, pending: Iterable[Done]) -> set[Done]:
        done, _ = concurrent.futures.wait(list(pending), return_when="FIRST_COMPLETED")  # type: ignore[arg-type]
        return set(done)

    def draining(self) -> bool:
        return self._draining.is_set()

    def drain(self) -> None:
        """From now on `draining()`: the process is stopping."""
        self._draining.set()


SYSTEM = SystemEnvironment()

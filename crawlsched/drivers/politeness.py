"""Per-host politeness: at most `max_per_host` requests at once to one host, and at least
`min_delay_s` between the starts of two requests to it.

One `HostPacer` per worker process, shared by its threads (as Scrapy's downloader slots are
per host): a batch of pages on one site is paced however many threads crawl it. Processes and
machines do not coordinate; the README says so.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

MAX_IDLE_SLOTS = 10_000  # hosts remembered past their delay, before idle ones are dropped


@dataclass
class _Slot:
    users: int = 0  # threads holding or waiting for this slot (guarded by the pacer's lock)
    active: int = 0
    next_start: float = float("-inf")
    condition: threading.Condition = field(default_factory=threading.Condition)


class HostPacer:
    def __init__(
        self,
        min_delay_s: float,
        max_per_host: int,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if min_delay_s < 0:
            raise ValueError(f"min_delay_s must be >= 0, got {min_delay_s}")
        if max_per_host < 1:
            raise ValueError(f"max_per_host must be >= 1, got {max_per_host}")
        self.min_delay_s = min_delay_s
        self.max_per_host = max_per_host
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._slots: dict[str, _Slot] = {}

    @contextlib.contextmanager
    def slot(self, host: str) -> Iterator[None]:
        slot = self._take(host.lower())
        try:
            with slot.condition:
                while slot.active >= self.max_per_host:
                    slot.condition.wait()
                slot.active += 1
                # Reserve this request's start time now, under the lock, so two threads never
                # take the same one; then wait for it outside the lock.
                start = max(self._clock(), slot.next_start)
                slot.next_start = start + self.min_delay_s
            try:
                if (wait := start - self._clock()) > 0:
                    self._sleep(wait)
                yield
            finally:
                with slot.condition:
                    slot.active -= 1
                    slot.condition.notify()
        finally:
            with self._lock:
                slot.users -= 1

    def _take(self, host: str) -> _Slot:
        """The host's slot, counted as in use. A worker crawls ever new hosts: slots nobody
        uses whose delay has passed are dropped (a fresh slot behaves the same), never one in
        use, so two threads always pace against the same slot."""
        with self._lock:
            if host not in self._slots and len(self._slots) >= MAX_IDLE_SLOTS:
                now = self._clock()
                for name in [
                    n for n, s in self._slots.items() if s.users == 0 and s.next_start <= now
                ]:
                    del self._slots[name]
            slot = self._slots.setdefault(host, _Slot())
            slot.users += 1
            return slot

    def __len__(self) -> int:
        """Hosts remembered (for tests and metrics)."""
        with self._lock:
            return len(self._slots)

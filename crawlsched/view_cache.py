"""ViewCache: readings a process's threads share for a moment, each with when it was taken on
the monotonic clock (a run's stop state read once a second for all its batches here, a run's
pages per depth for every viewer). One lock guards the entries; what goes in is immutable."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from crawlsched.environment import Environment

MAX_ENTRIES = 10_000


class ViewCache:
    def __init__(self, env: Environment) -> None:
        self._lock = env.lock()
        self._entries: dict[Hashable, tuple[float, Any]] = {}  # guarded by _lock

    def get(self, key: Hashable) -> tuple[float, Any] | None:
        """(taken at, value), or None."""
        with self._lock:
            return self._entries.get(key)

    def put(self, key: Hashable, taken_at: float, value: Any) -> None:
        with self._lock:
            if len(self._entries) >= MAX_ENTRIES and key not in self._entries:
                oldest = min(self._entries, key=lambda k: self._entries[k][0])
                del self._entries[oldest]
            self._entries[key] = (taken_at, value)

    def drop_older_than(self, taken_at: float) -> None:
        with self._lock:
            self._entries = {k: v for k, v in self._entries.items() if v[0] >= taken_at}

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

"""One look at a run's queued jobs, shared for a moment by every batch of this process.

A batch whose own pages all wait for their hosts looks for jobs to take over (`take_over`):
two store reads, a sample of the run's queued jobs and their hosts' holders. The batches of
one process looked at the same run and task several times a second, each look much like the
last: the benchmark counted 0.73 commands a page in these reads alone. So a look is kept for
`SHARE_S`, and the process's other batches pick from what it found, less what they took.

Nothing is believed that the take cannot check: a job another process took meanwhile is not
moved by the take (a conditional write), and a holder that changed meanwhile costs at worst a
page set aside for its host, as any refusal does.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import datetime
from typing import Any

SHARE_S = 0.5

LookKey = tuple[str, str, str]  # run, task, media


@dataclass
class Look:
    docs: list[dict[str, Any]]  # the queued jobs found, as the store had them
    elsewhere: dict[str, datetime]  # their hosts another process holds or a block stops: until
    at: float  # the clock's reading when it was made


class SharedLooks:
    """The last look per (run, task, media) of this process, for `share_s` after it was made.
    Thread-safe: the looks are handed out as copies of their lists."""

    def __init__(self, share_s: float = SHARE_S, clock: Callable[[], float] = time.monotonic):
        self.share_s = share_s
        self.clock = clock
        self._lock = threading.Lock()
        self._looks: dict[LookKey, Look] = {}

    def recent(self, key: LookKey) -> Look | None:
        """The look made for `key` less than `share_s` ago, or None (a new one is due)."""
        with self._lock:
            now = self.clock()
            for old in [k for k, look in self._looks.items() if now - look.at >= self.share_s]:
                del self._looks[old]
            look = self._looks.get(key)
            return None if look is None else Look(list(look.docs), dict(look.elsewhere), look.at)

    def keep(self, key: LookKey, docs: list[dict[str, Any]], elsewhere: dict[str, datetime]):
        """A look just made, for the process's next batches to use."""
        with self._lock:
            self._looks[key] = Look(list(docs), dict(elsewhere), self.clock())

    def taken(self, key: LookKey, job_ids: Collection[Any]) -> None:
        """Jobs a batch of this process took: no other batch here picks them again."""
        with self._lock:
            look = self._looks.get(key)
            if look is not None:
                look.docs = [doc for doc in look.docs if doc["_id"] not in job_ids]

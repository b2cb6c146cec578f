"""Which queued jobs a running batch takes over: one per host it could send to now.

A batch keeps its worker thread until its last page is done. When every host a crawl meets is
paced, the batch spends most of that time waiting for its own hosts' turns while the batches of
its run queue behind it for a thread, holding pages of hosts that sit idle. So a batch whose
lanes would wait takes over a few jobs of those queued batches (`JobClaims.take_over`): of hosts
it does not crawl already, whose next start this process knows to be now or within `slack`
(not paced later, not held by another process, not blocked), one job per host, at most `room`.
The host that is ready soonest goes first; among equals, the store's order is kept.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any


def pick(
    candidates: Sequence[tuple[Any, str]],
    ready_at: Mapping[str, datetime],
    busy: Collection[str],
    now: datetime,
    slack: timedelta,
    room: int,
) -> list[Any]:
    """The job ids to take over, of `candidates` (job id, host key) in the store's order.
    A job with no host key (a URL no request could go to) is left to its own batch, whose
    crawl says so; a host missing from `ready_at` is not known to be ready."""
    if room <= 0:
        return []
    soon = now + slack
    first: dict[str, tuple[int, Any]] = {}  # host -> (position, job id) of its first job
    for position, (job_id, host) in enumerate(candidates):
        if not host or host in busy or host in first:
            continue
        at = ready_at.get(host)
        if at is None or at > soon:
            continue
        first[host] = (position, job_id)
    order = sorted(first, key=lambda host: (ready_at[host], first[host][0]))
    return [first[host][1] for host in order[:room]]

"""A batch's jobs and their hosts: which job to start next, and the jobs put aside while
their hosts are not ready (`crawl_loop`).

The readiest host's job goes first, so a batch over many hosts keeps its lanes busy instead of
waiting for one host's delay; a host that will not be ready soon (held by another process,
blocked, paced slower) has its jobs put aside, asked for once more when the rest is done, and
then given back to wait for it.
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

from crawlsched import metrics
from crawlsched.flow.crawl_progress import Progress
from crawlsched.politeness.pacer import HostNotReady
from crawlsched.runtime import Runtime

# A host this process could start a request to this soon counts as ready now.
READY_SLACK = timedelta(milliseconds=5)


def next_job(rt: Runtime, pending: list[dict], hosts: dict[int, str], busy: Counter) -> dict | None:
    """The next job to start, taken out of `pending`: the readiest of a host none of the
    batch's jobs in flight uses; else the readiest whose host could take one more request
    now (no delay between starts). None: wait for a job in flight."""
    if not busy:
        return readiest(rt, pending, hosts)
    idle = [d for d in pending if hosts[id(d)] not in busy]
    if idle:
        return readiest(rt, idle, hosts, pending)
    soon = rt.now() + READY_SLACK
    ready = [d for d in pending if rt.pacer.ready_at(hosts[id(d)]) <= soon]
    return readiest(rt, ready, hosts, pending) if ready else None


def ready_soon(rt: Runtime, pending: list[dict], hosts: dict[int, str]) -> bool:
    """Whether a pending job's host is ready now (within `READY_SLACK`) for this process."""
    soon = rt.now() + READY_SLACK
    return any(rt.pacer.ready_at(hosts[id(d)]) <= soon for d in pending)


def readiest(
    rt: Runtime, among: list[dict], hosts: dict[int, str], pending: list[dict] | None = None
) -> dict:
    """The job of `among` whose host is ready soonest, taken out of `pending` (`among`)."""
    doc = min(among, key=lambda d: rt.pacer.ready_at(hosts[id(d)]))
    (among if pending is None else pending).remove(doc)
    return doc


def set_aside(
    e: HostNotReady,
    doc: dict,
    pending: list[dict],
    aside: list[dict],
    not_ready: dict[str, HostNotReady],
    hosts: dict[int, str],
) -> list[dict]:
    """Put `doc` and the pending jobs of its host (not ready: `e`) aside; the pending left."""
    not_ready[e.key] = e
    waiting = [doc, *(d for d in pending if hosts[id(d)] == e.key)]
    metrics.jobs_waited_for_host(e.why, e.on_release, len(waiting))
    aside += waiting
    return [d for d in pending if hosts[id(d)] != e.key]


def ask_again(
    aside: list[dict], not_ready: dict[str, HostNotReady], hosts: dict[int, str]
) -> list[dict]:
    """The jobs put aside for hosts another process held when asked, taken back out of
    `aside`: such a host is often given back by the time the rest of the batch is done (the
    holder's own batch ended), and asking once more costs two store commands where parking
    the jobs costs a park, a wake and a delivery of their own."""
    again = [d for d in aside if not_ready[hosts[id(d)]].held_elsewhere]
    for key in {hosts[id(d)] for d in again}:
        del not_ready[key]
    aside[:] = [d for d in aside if hosts[id(d)] in not_ready]
    return again


def wait_for_hosts(
    progress: Progress, aside: list[dict], not_ready: dict[str, HostNotReady]
) -> None:
    """The jobs put aside go back to wait for their hosts: woken when one is given back (a
    host held elsewhere), not before the first one is ready (blocked or paced ones)."""
    progress.unfinished = [d["_id"] for d in aside]
    progress.interruption = "host not ready: " + "; ".join(map(str, not_ready.values()))[:500]
    progress.host_waits = set(not_ready)
    if not any(e.on_release for e in not_ready.values()):
        progress.not_before = min(e.until for e in not_ready.values())

"""A redelivered batch message that finds none of its jobs: its worker died after handing
parts over. The rest is held by the last part's id, which no message names: put it back to
wait now (`admission.requeue`: open to take-over by the run's running batches, admitted by the
next admission pass) instead of after the dispatch lease (15 minutes by default). Then send
each part's report again: the worker may have died between recording a part and sending its
report, and nothing else would ever count that part on its run (the coordinator ignores a
report it applied before). The rests move first: a part whose rest it still held would have
its report refused.

A message redelivered while its first worker still crawls (a dropped connection) takes the
rest from it as well: that worker's later records find their jobs gone and count nothing, as
for any reclaimed batch; the pages it crawls meanwhile are crawled again.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass

from crawlsched.crawl.pages import job_url
from crawlsched.crawl.parts import part_dispatch_id
from crawlsched.crawl.records import crawl_report
from crawlsched.flow.admission import requeue
from crawlsched.ids import encode_id
from crawlsched.logs import get_logger
from crawlsched.messages import BatchMessage, ReportMessage
from crawlsched.planning.due import derive_target
from crawlsched.planning.frontier_rules import MAX_PARTS
from crawlsched.planning.outcomes import PHASE_OUTCOMES
from crawlsched.resources.queueing import host_wait_key
from crawlsched.runtime import Runtime

log = get_logger(__name__)

PARTS_LOOKED_UP_AT_ONCE = 256  # part ids in one read


@dataclass(frozen=True)
class PartsRecovered:
    requeued: int  # jobs of the rest put back to wait
    reports: int  # parts' reports sent again
    # What the rest waits for (its hosts, which the dead worker may hold until its slices
    # end): the caller wakes it at once, so a host already free is crawled without a tick.
    wake: frozenset[str] = frozenset()


def recover_parts(
    rt: Runtime, message: BatchMessage, report: Callable[[ReportMessage], None]
) -> PartsRecovered:
    store = rt.jobs(message.collection)
    requeued, ended, wake = 0, [], set()
    labels = PHASE_OUTCOMES["crawl"]
    for first in range(1, MAX_PARTS + 1, PARTS_LOOKED_UP_AT_ONCE):
        last = min(first + PARTS_LOOKED_UP_AT_ONCE, MAX_PARTS + 1)
        ids = [part_dispatch_id(message.dispatch_id, part) for part in range(first, last)]
        left = store.left_under(ids, message.run_id, labels)
        ended += [dispatch_id for dispatch_id in ids if dispatch_id in left.ended]
        for dispatch_id, running in left.running.items():
            # Pages a part kept whose finder's report was not applied (the worker died in
            # between): planned once it is, as if never kept (the report is sent below).
            job_ids = store.give_back_unreleased(dispatch_id, running)
            if not job_ids:
                continue
            rest = message.model_copy(
                update={
                    "dispatch_id": dispatch_id,
                    "job_ids": [encode_id(job_id) for job_id in job_ids],
                    "lease_ids": [],
                    "stages_ms": {},  # (counted with the message's first part)
                }
            )
            reason = f"its worker died after handing a part over (message {message.dispatch_id})"
            hosts = _host_keys(rt, message, store.load_claimed(dispatch_id, job_ids))
            if requeue(rt, rest, job_ids, reason, also_needs=hosts) is not None:
                requeued += len(job_ids)
                wake |= hosts
    now = rt.env.monotonic()
    for dispatch_id in ended:  # after the rests moved
        part = message.model_copy(update={"dispatch_id": dispatch_id, "stages_ms": {}})
        report(crawl_report(part, now, now))
    if requeued or ended:
        log.warning(
            "batch_parts_recovered",
            dispatch_id=message.dispatch_id,
            requeued=requeued,
            reports_sent_again=len(ended),
        )
    return PartsRecovered(requeued, len(ended), frozenset(wake))


def _host_keys(rt: Runtime, message: BatchMessage, docs: list[dict]) -> frozenset[str]:
    """What jobs of `message`'s kind wait for when their hosts are not ready: their hosts'
    wait keys (`queueing.host_wait_key`)."""
    media = rt.media(message.media_name)
    fields = ("target", *rt.target_fields(message.collection))
    keys = set()
    for doc in docs:
        with contextlib.suppress(ValueError, OSError):
            host = rt.pacer.key_of(job_url(doc, derive_target(doc, fields), media))
            keys.add(host_wait_key(host))
    return frozenset(keys)

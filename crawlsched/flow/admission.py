"""The gatekeepers: lease what a batch needs, all or nothing, or give its jobs back (starved)."""

from __future__ import annotations

import time
from collections.abc import Callable

from crawlsched.logs import get_logger
from crawlsched.messages import BatchMessage, ReportMessage
from crawlsched.planning.outcomes import Outcome
from crawlsched.resources.pools import Need
from crawlsched.runtime import Runtime

log = get_logger(__name__)


def starve(
    rt: Runtime,
    message: BatchMessage,
    report: Callable[[ReportMessage], None],
    stages_ms: dict[str, float] | None = None,
) -> None:
    """Give the jobs back untouched and tell the coordinator they are finished for this run."""
    store = rt.jobs(message.collection)
    store.release(message.dispatch_id)
    # Read back rather than trust our own count: a redelivery must report the same numbers.
    counts = store.outcomes_of(message.dispatch_id, {Outcome.STARVED})
    log.info("batch_starved", dispatch_id=message.dispatch_id, jobs=counts.get(Outcome.STARVED, 0))
    if counts:
        report(
            ReportMessage(
                run_id=message.run_id,
                report_key=f"{message.dispatch_id}:admit",
                counts=counts,
                stages_ms={**message.stages_ms, **(stages_ms or {})},
            )
        )


def admit(
    rt: Runtime,
    message: BatchMessage,
    forward: Callable[[BatchMessage], None],
    report: Callable[[ReportMessage], None],
) -> bool:
    started = time.perf_counter()
    need = Need(message.need_login, message.need_selenium, message.media_name)
    leases = rt.pools.acquire(need, holder=message.dispatch_id, now=rt.now())
    elapsed = {"admit": round((time.perf_counter() - started) * 1000, 2)}
    if leases is None:
        starve(rt, message, report, elapsed)
        return False
    try:
        forward(
            message.model_copy(
                update={
                    "lease_ids": [lease.lease_id for lease in leases],
                    "stages_ms": {**message.stages_ms, **elapsed},
                }
            )
        )
    except BaseException:
        rt.pools.release(leases)
        raise
    log.info("leases_granted", dispatch_id=message.dispatch_id, leases=len(leases))
    return True

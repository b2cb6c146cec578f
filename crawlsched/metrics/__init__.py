"""Prometheus metrics: one-line calls for the flow modules, no-ops until `enable()`.

Off by default, so commands, the demo and in-process tests pay nothing. A `dramatiq` worker
process turns them on at boot (`metrics.worker`), after pointing prometheus-client at its
multiprocess directory; its group's exporter serves what every process counted, summed. This
module imports prometheus-client only inside `enable()`, for that reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from crawlsched.metrics.readings import pool_labels

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from crawlsched.metrics.definitions import FlowMetrics

_active: FlowMetrics | None = None


def enable(registry: CollectorRegistry | None = None) -> FlowMetrics:
    """Create the metrics in `registry` (a fresh one by default) and start counting."""
    global _active
    from prometheus_client import CollectorRegistry

    from crawlsched.metrics.definitions import FlowMetrics

    _active = FlowMetrics(registry if registry is not None else CollectorRegistry())
    return _active


def disable() -> None:
    global _active
    _active = None


def active() -> FlowMetrics | None:
    return _active


# ---- the calls the flow makes (each a no-op while metrics are off) ------------------------


def tick_done(seconds: float) -> None:
    if _active:
        _active.ticks.inc()
        _active.tick_seconds.observe(seconds)


def schedule_fired() -> None:
    """One fire time won by this ticker and sent to the planner."""
    if _active:
        _active.schedules_fired.inc()


def missed_runs(reason: str, n: int = 1) -> None:
    """`n` fire times never run, for `reason` (one of definitions.MISSED_REASONS)."""
    if _active and n > 0:
        from crawlsched.metrics.definitions import MISSED_REASONS

        if reason not in MISSED_REASONS:
            raise ValueError(f"missed-run reason {reason!r} is not one of {MISSED_REASONS}")
        _active.missed_runs.labels(reason=reason).inc(n)


def run_planned(planning_s: float, lag_s: float) -> None:
    if _active:
        _active.runs_planned.inc()
        _active.plan_seconds.observe(planning_s)
        _active.schedule_lag.observe(max(lag_s, 0.0))


def run_finished() -> None:
    if _active:
        _active.runs_finished.inc()


def batch_dispatched(task: str, media: str, category: str, jobs: int) -> None:
    if _active:
        _active.batches_dispatched.labels(task, category).inc()
        _active.jobs_dispatched.labels(task, media, category).inc(jobs)


def jobs_finished(task: str, media: str, outcomes: Mapping[str, int]) -> None:
    if _active:
        for outcome, n in outcomes.items():
            _active.jobs_finished.labels(task, media, outcome).inc(n)


def batch_parked(category: str, media: str) -> None:
    if _active:
        _active.batches_parked.labels(category, media).inc()


def batch_admitted(category: str, media: str, waited_s: float) -> None:
    if _active:
        _active.batches_admitted.labels(category, media).inc()
        _active.admission_wait.labels(category).observe(max(waited_s, 0.0))


def batch_starved(short_key: str, task: str, media: str, jobs: int) -> None:
    if _active:
        _active.batches_starved.labels(*pool_labels(short_key)).inc()
        _active.jobs_finished.labels(task, media, "starved").inc(jobs)


def batch_requeued(task: str, media: str) -> None:
    if _active:
        _active.batches_requeued.labels(task, media).inc()


def node_marked_down() -> None:
    if _active:
        _active.nodes_marked_down.inc()


def proxy_failed(kind: str) -> None:
    if _active:
        _active.proxy_failures.labels(kind).inc()


def account_logins(logins: int, reused: bool) -> None:
    """A batch's logins (0 when it reused its account's kept session)."""
    if _active:
        if logins:
            _active.account_logins.inc(logins)
        if reused:
            _active.sessions_reused.inc()


def report_received(lag_s: float) -> None:
    """A report reached the coordinator `lag_s` after it was sent."""
    if _active:
        _active.report_lag.observe(max(lag_s, 0.0))


def report_ignored() -> None:
    if _active:
        _active.reports_ignored.inc()


def pages_discovered(n: int) -> None:
    """`n` pages new to their run, found by a crawl (per media: the run's own counts)."""
    if _active and n > 0:
        _active.pages_discovered.inc(n)


def host_pacing_waited(seconds: float) -> None:
    """A crawl thread slept `seconds` for its host's turn."""
    if _active:
        _active.host_pacing_wait.observe(max(seconds, 0.0))


def host_wait_reason(why: str, held_elsewhere: bool) -> str:
    """The closed label for a host that was not ready (`HostNotReady.why`)."""
    if held_elsewhere:
        return "held"
    if why.startswith("blocked"):
        return "blocked"
    if "budget" in why:
        return "budget"
    return "paced"


def jobs_waited_for_host(why: str, held_elsewhere: bool, jobs: int) -> None:
    if _active and jobs > 0:
        _active.host_waits.labels(host_wait_reason(why, held_elsewhere)).inc(jobs)


def jobs_taken_over(task: str, media: str, jobs: int) -> None:
    if _active and jobs > 0:
        _active.jobs_taken_over.labels(task, media).inc(jobs)


def pages_kept(task: str, media: str, pages: int) -> None:
    if _active and pages > 0:
        _active.pages_kept.labels(task, media).inc(pages)


def store_command(collection: str, method: str) -> None:
    """One command sent to the store (`store/counting.py` counts each where it is sent)."""
    if _active:
        _active.store_commands.labels(collection, method).inc()


def host_blocked(status: int) -> None:
    if _active:
        _active.host_blocks.labels(str(status)).inc()

"""crawlsched's own metric objects (counters and histograms counted where things happen).

Imported only by `crawlsched.metrics.enable()`: prometheus-client picks its multiprocess mode
when it is first imported, so a worker sets PROMETHEUS_MULTIPROC_DIR before this module loads.
Labels are small closed sets (task, media, category, pool, outcome, reason): never a URL, a
username or an id. Gauges read from MongoDB are not here: see `store_gauges`.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

from crawlsched.resources.host_rules import BLOCKING_STATUSES
from crawlsched.schedules.policies import MissedReason

# Seconds, from a fraction of a second (a tick) to a day (a batch that waited its whole bound).
SECONDS_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 86400)
# Why a fire time was never run: the same closed set the `missed_runs` collection records (no
# clock ticked in time, the previous run still ran, the schedule was paused, batches starved).
MISSED_REASONS = tuple(reason.value for reason in MissedReason)
# Why a crawl put a host's jobs aside (see `host_wait_reason`).
HOST_WAIT_REASONS = ("held", "blocked", "paced", "budget")
# How a proxy failed under a batch (see `drivers.proxied`).
PROXY_FAILURE_KINDS = ("failed", "blocked")


class FlowMetrics:
    """Everything the actors count, registered in `registry`."""

    def __init__(self, registry: CollectorRegistry) -> None:
        def counter(name: str, doc: str, labels: tuple[str, ...] = ()) -> Counter:
            return Counter(name, doc, labels, registry=registry)

        def histogram(name: str, doc: str, labels: tuple[str, ...] = ()) -> Histogram:
            return Histogram(name, doc, labels, buckets=SECONDS_BUCKETS, registry=registry)

        self.ticks = counter("crawlsched_ticks_total", "Ticks processed by the ticker.")
        self.tick_seconds = histogram(
            "crawlsched_tick_duration_seconds", "Time one tick took (fire, reclaim, probe…)."
        )
        self.schedules_fired = counter(
            "crawlsched_schedules_fired_total", "Fire times won by this deployment's tickers."
        )
        self.missed_runs = counter(
            "crawlsched_missed_runs_total",
            "Fire times that were never run, by reason.",
            ("reason",),
        )
        self.runs_planned = counter("crawlsched_runs_planned_total", "Runs whose planning closed.")
        self.runs_finished = counter("crawlsched_runs_finished_total", "Runs that finished.")
        self.plan_seconds = histogram(
            "crawlsched_planning_duration_seconds", "Time to plan one firing of a schedule."
        )
        self.schedule_lag = histogram(
            "crawlsched_schedule_lag_seconds",
            "From a schedule's fire time to its run's batches all dispatched.",
        )
        self.batches_dispatched = counter(
            "crawlsched_batches_dispatched_total",
            "Batches claimed and sent on by the planner.",
            ("task", "category"),
        )
        self.jobs_dispatched = counter(
            "crawlsched_jobs_dispatched_total",
            "Jobs claimed and sent on by the planner.",
            ("task", "media", "category"),
        )
        self.jobs_finished = counter(
            "crawlsched_jobs_finished_total",
            "Jobs that ended an attempt, by outcome (succeeded, failed, exhausted, expired, "
            "starved).",
            ("task", "media", "outcome"),
        )
        self.batches_parked = counter(
            "crawlsched_batches_parked_total",
            "Batches from the planner that needed an account and/or a Selenium node (admitted "
            "at once, or after waiting their turn).",
            ("category", "media"),
        )
        self.batches_admitted = counter(
            "crawlsched_batches_admitted_total",
            "Waiting batches admitted with their leases.",
            ("category", "media"),
        )
        self.admission_wait = histogram(
            "crawlsched_admission_wait_seconds",
            "How long an admitted batch waited for its resources.",
            ("category",),
        )
        self.batches_starved = counter(
            "crawlsched_batches_starved_total",
            "Batches that waited past their bound, by the pool that ran short.",
            ("pool", "media"),
        )
        self.batches_requeued = counter(
            "crawlsched_batches_requeued_total",
            "Batches that lost their node or account mid-way and went back to wait.",
            ("task", "media"),
        )
        self.nodes_marked_down = counter(
            "crawlsched_nodes_marked_down_total", "Times a Selenium node was found or made down."
        )
        self.report_lag = histogram(
            "crawlsched_report_lag_seconds",
            "From a crawl's report being sent to the coordinator applying it.",
        )
        self.reports_ignored = counter(
            "crawlsched_reports_ignored_total",
            "Reports dropped as duplicates (redeliveries) or for an unknown run.",
        )
        self.pages_discovered = counter(
            "crawlsched_pages_discovered_total",
            "Pages a crawl discovered that its run took in (new to the run, within its bounds).",
        )
        self.host_pacing_wait = histogram(
            "crawlsched_host_pacing_wait_seconds",
            "How long a crawl thread slept for its host's turn before a request (politeness).",
        )
        self.host_waits = counter(
            "crawlsched_host_waits_total",
            "Jobs put aside to wait because their host was not ready, by why (held by another "
            "process, blocked, paced, daily budget used).",
            ("reason",),
        )
        self.jobs_taken_over = counter(
            "crawlsched_jobs_taken_over_total",
            "Jobs a running batch took over from a batch of its run that had not begun, to crawl "
            "hosts that sat idle while its own waited for their turn, or to keep a paced host its "
            "process holds.",
            ("task", "media"),
        )
        self.pages_kept = counter(
            "crawlsched_pages_kept_total",
            "Pages a batch found of a host its process holds and paces and crawled itself, "
            "instead of handing them to its run to be planned, batched and granted the host.",
            ("task", "media"),
        )
        self.host_blocks = counter(
            "crawlsched_host_blocks_total",
            "Times a host answered 429 or 503 and was blocked for the whole cluster.",
            ("status",),
        )
        self.store_commands = counter(
            "crawlsched_store_commands_total",
            "MongoDB commands this process sent, by collection and method (cursor continuations "
            "and driver housekeeping aside): the store's load, and with "
            "crawlsched_jobs_finished_total what a finished job costs it.",
            ("collection", "method"),
        )
        self.proxy_failures = counter(
            "crawlsched_proxy_failures_total",
            "Times a proxy failed under a batch (refused, stalled, broke the connection: "
            "failed) or an answer through it showed its media's block signs (blocked); the "
            "proxy then rests, doubling its rest with each failure in a row.",
            ("kind",),
        )
        self.account_logins = counter(
            "crawlsched_account_logins_total",
            "Logins an account made in a batch; a batch that reuses the account's kept session "
            "makes none (see crawlsched_sessions_reused_total). No label: a series from the "
            "first scrape, so the two compare at once.",
        )
        self.sessions_reused = counter(
            "crawlsched_sessions_reused_total",
            "Batches that went on with their account's kept login session instead of logging in.",
        )
        # Zero series for the closed label sets, so rates and alerts work from the first scrape.
        for kind in PROXY_FAILURE_KINDS:
            self.proxy_failures.labels(kind=kind)
        for reason in HOST_WAIT_REASONS:
            self.host_waits.labels(reason=reason)
        for status in sorted(BLOCKING_STATUSES):
            self.host_blocks.labels(status=str(status))
        for reason in MISSED_REASONS:
            self.missed_runs.labels(reason=reason)

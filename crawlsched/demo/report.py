"""What `crawlsched demo` shows: the live frame, the final tables, the legend and what to do next.

Everything here fits 80 columns, and nothing here lists outcomes by hand: they come from
`Outcome`, the one place that defines them, so a new outcome shows up in the legend and in the
final line without anyone remembering to add it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from dramatiq.brokers.stub import StubBroker
from dramatiq.common import dq_name
from rich.console import Group, RenderableType
from rich.table import Table

from crawlsched.cli.runs import SHORT, runs_table
from crawlsched.planning.due import Category
from crawlsched.planning.outcomes import OUTCOME_MEANINGS, Outcome


def outcomes() -> tuple[str, ...]:
    """Every outcome a run counts, in the order `Outcome` declares them."""
    return tuple(
        value
        for name, value in vars(Outcome).items()
        if name.isupper() and not name.startswith("_") and isinstance(value, str)
    )


def outcome_legend() -> Table:
    """What the runs table's columns mean: plan, left, and every outcome (a meaning that does
    not fit the width wraps in its own column)."""
    table = Table.grid(padding=(0, 1))
    table.add_column(no_wrap=True)
    table.add_column()
    table.add_row("plan:", "jobs claimed for the run")
    table.add_row("left:", "jobs not ended yet")
    for outcome in outcomes():
        meaning = OUTCOME_MEANINGS.get(outcome, "see crawlsched/planning/outcomes.py")
        table.add_row(f"{SHORT.get(outcome, outcome)} ({outcome}):", meaning)
    return table


def outcome_totals(runs: Iterable[dict[str, Any]]) -> Counter:
    totals: Counter = Counter()
    for run in runs:
        totals.update(run.get("counts", {}))
    return totals


def summary_line(runs: list[dict[str, Any]]) -> str:
    """One line that accounts for every job, planned or discovered, by its outcome, every
    outcome named."""
    totals = outcome_totals(runs)
    planned = sum(run.get("planned", 0) for run in runs)
    discovered = sum(run.get("discovered", 0) for run in runs)
    parts = ", ".join(f"{totals.get(o, 0)} {o}" for o in outcomes())
    return f"all {planned} planned and {discovered} discovered jobs ended: {parts}"


# Short headers so that the crawled table fits 80 columns.
MODEL_SHORT = {"profile": "prof", "publication": "pub", "comment": "comm", "article": "art"}


def crawled_table(rt: Any, runs: list[dict[str, Any]]) -> Table:
    """What the runs stored: documents per data model, and items new, changed, unchanged."""
    from crawlsched.catalog import MODEL_COLLECTIONS

    table = Table(title="Crawled: documents stored per model", show_edge=False, pad_edge=False)
    table.add_column("run", no_wrap=True)
    for model in MODEL_COLLECTIONS:
        table.add_column(MODEL_SHORT.get(model, model), justify="right")
    table.add_column("new/chg/same", justify="right")
    for run in runs:
        stored = [
            str(rt.db[collection].count_documents({"run_id": run["_id"]}))
            for collection in MODEL_COLLECTIONS.values()
        ]
        items = run.get("items") or {}
        counts = f"{items.get('new', 0)}/{items.get('changed', 0)}/{items.get('unchanged', 0)}"
        table.add_row(_run_name(run), *stored, counts)
    return table


# ---- queues ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class QueueDepth:
    queue: str
    waiting: int  # sent and not yet acknowledged: ready, prefetched by a worker, or running
    delayed: int  # on the queue's delay queue (retries with backoff, `send_with_options(delay=)`)


def queue_depths(broker: StubBroker) -> list[QueueDepth]:
    """The real load of every queue of the in-process broker, read from the broker itself.

    `qsize()` would read 0 most of the time: a running worker prefetches messages off the queue
    into its own buffer at once. A message stays an unfinished task of its queue until the worker
    acknowledges it, so `unfinished_tasks` counts everything sent and not yet processed. A
    delayed message sits on `<queue>.DQ` the same way until its time comes and it moves back.
    """
    depths = []
    for name in sorted(broker.queues):
        if name in broker.delay_queues or name.endswith(".XQ"):
            continue
        delayed = broker.queues.get(dq_name(name))
        depths.append(
            QueueDepth(
                name,
                broker.queues[name].unfinished_tasks,
                delayed.unfinished_tasks if delayed is not None else 0,
            )
        )
    return depths


def queues_table(depths: list[QueueDepth], seen: set[str] | None = None) -> Table:
    """Queues that hold messages now, or held some earlier (`seen` remembers them across frames,
    so rows do not come and go and the frame stays short enough for a 24-line terminal)."""
    seen = set() if seen is None else seen
    seen.update(d.queue for d in depths if d.waiting or d.delayed)
    table = Table(title="Queues (messages not processed yet)")
    table.add_column("queue", no_wrap=True)
    table.add_column("waiting", justify="right")
    table.add_column("delayed", justify="right")
    for depth in depths:
        if depth.queue in seen:
            table.add_row(depth.queue, str(depth.waiting), str(depth.delayed))
    if not seen:
        table.add_row("(no messages yet)", "", "")
    return table


def live_frame(
    runs: list[dict[str, Any]],
    depths: list[QueueDepth],
    waiting_batches: int,
    elapsed_s: float,
    seen: set[str],
) -> RenderableType:
    """One frame of the terminal view: runs, queues, and where the unfinished work is.

    Most of a run's unfinished jobs are usually in batches that wait, as documents, for an
    account or a browser slot, not in messages: the status line says both.
    """
    outstanding = sum(max(r.get("outstanding", 0), 0) for r in runs if r.get("state") != "finished")
    status = (
        f"{elapsed_s:.1f} s: {outstanding} jobs not ended yet; "
        f"{waiting_batches} batches waiting for an account or node; "
        f"{sum(d.waiting for d in depths)} messages queued, "
        f"{sum(d.delayed for d in depths)} delayed"
    )
    return Group(runs_table(runs, title="Runs (live)"), queues_table(depths, seen), status)


# ---- the final report -----------------------------------------------------------------------


def _run_name(run: dict[str, Any]) -> str:
    # Schedule on one line, fire time on the next: never cut, whatever the width.
    return run["_id"].replace("@", "\n@", 1)


def stages_table(runs: list[dict[str, Any]]) -> Table:
    table = Table(title="Time per stage (ms, summed over batches)")
    for column in ("run", "plan", "wait", "crawl", "plan→finish"):
        table.add_column(column, justify="left" if column == "run" else "right", no_wrap=True)
    for run in runs:
        stages = run.get("stages_ms", {})
        wall = "…"
        if isinstance(run.get("finished_at"), datetime) and isinstance(
            run.get("created_at"), datetime
        ):
            wall = f"{(run['finished_at'] - run['created_at']).total_seconds() * 1000:.0f}"
        table.add_row(
            _run_name(run),
            f"{stages.get('plan', 0):.0f}",
            f"{stages.get('wait', 0):.0f}",
            f"{stages.get('crawl', 0):.0f}",
            wall,
        )
    return table


def categories_table(runs: list[dict[str, Any]]) -> Table:
    table = Table(title="Planned per category (jobs / batches)")
    table.add_column("category", no_wrap=True)
    for run in runs:
        table.add_column(run.get("schedule_id") or run["_id"], justify="right", no_wrap=True)
    for c in Category:
        table.add_row(
            c.value,
            *(
                f"{r.get('plan_stats', {}).get(f'jobs.{c.value}', 0)} / "
                f"{r.get('plan_stats', {}).get(f'batches.{c.value}', 0)}"
                for r in runs
            ),
        )
    return table


def final_report(runs: list[dict[str, Any]]) -> list[RenderableType]:
    """The tables printed once at the end, terminal or not, in this order."""
    return [
        runs_table(runs, title="Runs"),
        outcome_legend(),
        categories_table(runs),
        stages_table(runs),
    ]


NEXT_STEPS = """\
This demo's data is gone now: the embedded store (mongomock://) lives only as
long as the one process that opened it. To keep your data, run the standalone
server: API, status page, clock and workers in one process, no other service.
  crawlsched standalone     # http://127.0.0.1:8080; data in CRAWLSCHED_DATA_DIR
Then, from another terminal:
  crawlsched jobs add website https://example.org/
  crawlsched run now sweep-websites; sleep 10; crawlsched run list
For RabbitMQ and MongoDB, see "Running workers" in README.md.
Run the whole test suite (it installs what it needs): bash scripts/test"""


def bindings_table(
    seen: dict[str, Any], logins: dict[str, int], bindings: dict[str, str], addresses: dict
) -> Table:
    """Each bound account: its proxy, the addresses the network saw it from, its logins."""
    table = Table(
        title="Proxies: each account as the network saw it", show_edge=False, pad_edge=False
    )
    for column in ("account", "proxy", "leaves from", "seen from", "requests", "logins"):
        table.add_column(column, no_wrap=True)
    for account, proxy in sorted(bindings.items()):
        by_address = seen.get(account) or {}
        table.add_row(
            account,
            proxy,
            addresses[proxy],
            ", ".join(sorted(by_address)) or "-",
            str(sum(by_address.values())),
            str(logins.get(account, 0)),
        )
    return table


def binding_problems(
    seen: dict[str, Any], banned: dict[str, str], bindings: dict[str, str], addresses: dict
) -> list[str]:
    """A bound account seen from another address than its proxy's, or banned by the site."""
    problems = [f"the network banned {account}: {why}" for account, why in sorted(banned.items())]
    for account, proxy in sorted(bindings.items()):
        off = set(seen.get(account) or {}) - {addresses[proxy]}
        if off:
            problems.append(f"{account} was seen from {', '.join(sorted(off))}, not its proxy")
    return problems

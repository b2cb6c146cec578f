"""`crawlsched demo`: seed, tick once, crawl a local site, show progress, check nothing is lost."""

from __future__ import annotations

import contextlib
import threading
import time
from collections import Counter
from datetime import datetime
from typing import Any

import dramatiq
import typer
from dramatiq.common import q_name
from rich.live import Live
from rich.table import Table

from crawlsched.catalog import JOB_COLLECTIONS, JobState
from crawlsched.cli.common import console, err_console
from crawlsched.cli.runs import legend, runs_table
from crawlsched.planning.due import Category
from crawlsched.planning.outcomes import OUTCOME_MEANINGS
from crawlsched.settings import Settings
from crawlsched.store.runs import FINISHED

DEMO_STORE = "mongomock://demo"
DEMO_WAIT_S = 5.0


class InFlight(dramatiq.Middleware):
    """Messages sent and not yet processed, per queue: what the demo's queue panel shows.

    The stub broker's own queues look empty while a worker runs, because the worker takes
    messages into its own buffer at once; counting sends and completions shows the real load.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.counts: Counter = Counter()

    def before_enqueue(self, broker, message, delay) -> None:
        # A delayed message is enqueued twice (to the delay queue, then back): count it once.
        if delay is None and "eta" in message.options:
            return
        with self.lock:
            self.counts[q_name(message.queue_name)] += 1

    def _done(self, message) -> None:
        with self.lock:
            self.counts[q_name(message.queue_name)] -= 1

    def after_process_message(self, broker, message, *, result=None, exception=None) -> None:
        self._done(message)

    def after_skip_message(self, broker, message) -> None:
        self._done(message)


def _queues_table(broker: Any, in_flight: InFlight) -> Table:
    table = Table(title="Queues (messages not yet processed)")
    table.add_column("queue")
    table.add_column("waiting", justify="right")
    for name in sorted(q for q in broker.queues if not q.endswith((".DQ", ".XQ"))):
        table.add_row(name, str(max(in_flight.counts[name], 0)))
    return table


def _short(run: dict) -> str:
    return run["_id"].replace("@", "\n@", 1)


def _stages_table(runs: list[dict]) -> Table:
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
            _short(run),
            f"{stages.get('plan', 0):.0f}",
            f"{stages.get('wait', 0):.0f}",
            f"{stages.get('crawl', 0):.0f}",
            wall,
        )
    return table


def _categories_table(runs: list[dict]) -> Table:
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


def summary_line(runs: list[dict]) -> str:
    """One line that accounts for every planned job by its outcome."""
    totals: Counter = Counter()
    for run in runs:
        totals.update(run.get("counts", {}))
    planned = sum(run.get("planned", 0) for run in runs)
    parts = ", ".join(f"{totals.get(o, 0)} {o}" for o in OUTCOME_MEANINGS)
    return f"all {planned} planned jobs ended: {parts}; no lease held, nothing waiting"


NEXT_STEPS = """Next: run the real thing (RabbitMQ and MongoDB; see README "Running workers"):
  export CRAWLSCHED_BROKER_URL=amqp://guest:guest@127.0.0.1:5672/%2F
  export CRAWLSCHED_MONGO_URL=mongodb://127.0.0.1:27017
  export CRAWLSCHED_SECRET_KEY=$(crawlsched accounts keygen)
  crawlsched init-db
  dramatiq crawlsched.actors --processes 2 --threads 8 --skip-logging
  crawlsched clock"""


def losses(rt: Any, runs: list[dict]) -> list[str]:
    """Everything that would mean work was lost; empty when the demo ended cleanly."""
    problems = []
    for run in runs:
        if run["state"] != FINISHED:
            problems.append(f"run {run['_id']} did not finish ({run['outstanding']} outstanding)")
        finished = sum(run.get("counts", {}).values())
        if finished != run.get("planned", 0):
            problems.append(f"run {run['_id']}: planned {run['planned']} but {finished} ended")
    for collection in JOB_COLLECTIONS:
        stuck = rt.jobs(collection).summary().get(str(int(JobState.RUNNING)), 0)
        if stuck:
            problems.append(f"{stuck} {collection} jobs still running")
    for pool, row in rt.inventory.overview(rt.now()).items():
        if row["held"]:
            problems.append(f"{row['held']} {pool} leases still held")
    if waiting := rt.waiting.all():
        problems.append(f"{len(waiting)} batches still waiting for a resource")
    return problems


def register(app: typer.Typer) -> None:
    @app.command("demo")
    def demo(
        timeout: float = typer.Option(50.0, min=1, help="Give up (and fail) after this long."),
        threads: int = typer.Option(4, min=1, max=32, help="In-process worker threads."),
    ) -> None:
        """Run the whole system in one process on embedded defaults (no services needed).

        Serves a small website on 127.0.0.1, seeds profiles and websites in all four resource
        categories, fires both sweeps once, crawls with an in-process dramatiq worker, and
        exits non-zero if any job or lease was lost.
        """
        from dramatiq import Worker

        from crawlsched.brokers import setup_broker
        from crawlsched.demo.node import LocalChromedriver
        from crawlsched.demo.seed import seed
        from crawlsched.demo.site import DemoSite
        from crawlsched.resources.secrets import generate_key
        from crawlsched.runtime import get_runtime
        from crawlsched.store.client import drop_embedded

        settings = Settings(
            mongo_url=DEMO_STORE,
            broker_url="stub://",
            log_format="console",
            log_level="ERROR",
            # A throw-away key: the demo's store lives only as long as this process.
            secret_key=generate_key(),
            # Batches that find no free account or node wait this long, then starve.
            admission_wait_s=DEMO_WAIT_S,
            browser_host_resolver_rules="MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
        )
        drop_embedded(DEMO_STORE)
        broker = setup_broker(settings)
        in_flight = InFlight()
        broker.add_middleware(in_flight)
        from crawlsched.actors import ticker

        rt = get_runtime()
        started = time.perf_counter()
        node = LocalChromedriver() if LocalChromedriver.available() else None
        if node is None:
            console.print(
                "chromedriver not found: batches that need a Selenium node will wait "
                f"{DEMO_WAIT_S:.0f} s and starve (Debian: apt-get install chromium chromium-driver)"
            )
        with DemoSite() as site, node or contextlib.nullcontext():
            seeded = seed(rt, site.base_url, node.url if node else None)
            console.print(
                f"demo site at {site.base_url}; seeded {seeded['profiles']} profile jobs and "
                f"{seeded['websites']} website jobs; firing both sweeps"
            )
            for schedule in rt.schedules.all():
                rt.schedules.fire_now(schedule["_id"], rt.now())
            worker = Worker(broker, worker_threads=threads)
            worker.start()
            try:
                ticker.tick.send()
                last_tick = time.perf_counter()
                # Live frames only on a terminal: piped, the tables are printed once at the end.
                live = Live(console=console, refresh_per_second=8, transient=True)
                with live if console.is_terminal else contextlib.nullcontext():
                    while True:
                        runs = rt.runs.recent()
                        if console.is_terminal:
                            grid = Table.grid()
                            grid.add_row(runs_table(runs, title="Runs (live)"))
                            grid.add_row(_queues_table(broker, in_flight))
                            live.update(grid)
                        done = runs and all(r["state"] == FINISHED for r in runs)
                        if done or time.perf_counter() - started > timeout:
                            break
                        if time.perf_counter() - last_tick > 1:
                            ticker.tick.send()  # the clock: starves overdue waits
                            last_tick = time.perf_counter()
                        time.sleep(0.1)
            finally:
                worker.stop()
        runs = rt.runs.recent()
        console.print(runs_table(runs, title="Runs"))
        console.print(legend())
        console.print(_categories_table(runs))
        console.print(_stages_table(runs))
        console.print(f"elapsed {time.perf_counter() - started:.1f} s")
        lost = losses(rt, runs) if runs else ["no run was planned"]
        if lost:
            for line in lost:
                err_console.print(f"[red]LOST:[/red] {line}")
            raise typer.Exit(1)
        console.print(f"[green]{summary_line(runs)}[/green]")
        console.print(NEXT_STEPS)

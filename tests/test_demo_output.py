"""`crawlsched demo` as a newcomer meets it: piped into a log, or on an 80-column terminal."""

import os
import re
import subprocess
import sys
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import dramatiq
import pytest
from dramatiq import Worker
from dramatiq.brokers.stub import StubBroker
from rich.console import Console

from crawlsched.demo.report import (
    NEXT_STEPS,
    final_report,
    live_frame,
    outcomes,
    queue_depths,
    summary_line,
)
from crawlsched.planning.outcomes import OUTCOME_MEANINGS, Outcome
from tests.support.waiting import wait_for

CLI = str(Path(sys.executable).parent / "crawlsched")
TITLES = (
    "Runs",
    "Planned per category (jobs / batches)",
    "Time per stage (ms, summed over batches)",
)
# Read from the class itself, not from the demo's helper: what the code defines is the reference.
ALL_OUTCOMES = [v for k, v in vars(Outcome).items() if k.isupper() and isinstance(v, str)]


@pytest.fixture(scope="module")
def demo_output() -> str:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}  # piped: 80 columns
    result = subprocess.run(
        [CLI, "demo"], capture_output=True, text=True, timeout=300, check=False, env=env
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout


def test_demo_piped_prints_each_table_once_on_lines_of_its_own(demo_output):
    lines = demo_output.splitlines()
    for title in TITLES:
        # Exactly one line carries the title, and nothing else is on it (no frame glued to it).
        carrying = [line for line in lines if title in line]
        assert [line.strip() for line in carrying] == [title], carrying
    assert "Runs (live)" not in demo_output and "Queues" not in demo_output  # no live frames
    assert "\x1b[" not in demo_output and "\r" not in demo_output  # plain text, plain newlines
    assert demo_output.endswith("\n")


def test_demo_legend_and_final_line_account_for_every_outcome(demo_output):
    # Piped, the output is 80 columns wide: a meaning or the final line may wrap.
    flat = " ".join(demo_output.split())
    for outcome in ALL_OUTCOMES:
        assert f"({outcome}): {' '.join(OUTCOME_MEANINGS[outcome].split())}" in flat
    lines = demo_output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("all "))
    end = next(i for i, line in enumerate(lines) if line.startswith("no job left running"))
    final = " ".join(line.strip() for line in lines[start:end])
    found = re.match(r"all (\d+) planned and (\d+) discovered jobs ended: ", final)
    planned, discovered = int(found.group(1)), int(found.group(2))
    counts = dict(
        (outcome, int(n)) for n, outcome in re.findall(r"(\d+) ([a-z_]+)", final.split(": ")[1])
    )
    assert list(counts) == ALL_OUTCOMES
    # 56 profile jobs and 3 website jobs planned; pages found while crawling: follower pages,
    # list pages, articles and their comment pages
    assert planned == 59 and discovered > 50
    assert sum(counts.values()) == planned + discovered
    assert counts["starved"] == 0 or "chromedriver not found" in demo_output


def test_demo_ends_with_what_to_do_next(demo_output):
    tail = demo_output[demo_output.index("no job left running") :]
    for step in (
        "crawlsched standalone",
        "CRAWLSCHED_DATA_DIR",
        "crawlsched jobs add website",
        "crawlsched run now sweep-websites",
        "Running workers",
        "bash scripts/test",
        "mongomock://",
    ):
        assert step in tail, step
    assert max(len(line) for line in demo_output.splitlines()) <= 80


def test_every_outcome_has_a_meaning_and_the_demo_lists_them_all():
    # A new Outcome must come with what it means, or the legend would have nothing to say.
    assert set(OUTCOME_MEANINGS) == set(ALL_OUTCOMES)
    assert list(outcomes()) == ALL_OUTCOMES


def _fake_runs() -> list[dict]:
    created = datetime(2026, 11, 22, 15, 33, 32, tzinfo=UTC)
    return [
        {
            "_id": f"{schedule}@20261122T153332Z",
            "schedule_id": schedule,
            "state": state,
            "planned": 999,
            "outstanding": 0 if state == "finished" else 12,
            "planning": False,
            "counts": {o: 999 for o in ALL_OUTCOMES},  # the demo plans 84 jobs
            "plan_stats": {"jobs.need_only_login": 24, "batches.need_only_login": 2},
            "stages_ms": {"plan": 78.2, "wait": 84_680.1, "crawl": 149_950.5},
            "created_at": created,
            "finished_at": created + timedelta(seconds=7.5),
        }
        for schedule, state in (("sweep-profiles", "finished"), ("sweep-websites", "running"))
    ]


def _render_80(*renderables) -> str:
    console = Console(width=80, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    for renderable in renderables:
        console.print(renderable)
    return console.export_text()


def test_demo_output_fits_80_columns_without_cutting_names():
    runs = _fake_runs()
    broker = StubBroker()
    broker.declare_queue("crawlsched.crawl.profile_replies")
    broker.enqueue(dramatiq.Message("crawlsched.crawl.profile_replies", "a", (), {}, {}))
    depths = queue_depths(broker)
    text = _render_80(
        live_frame(runs, depths, 3, 1.5, set()),
        *final_report(runs),
        summary_line(runs),
        NEXT_STEPS,
    )
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "…" not in text  # rich marks a cut cell with an ellipsis
    for whole in ("sweep-profiles", "sweep-websites", "@20261122T153332Z", "finished", "running"):
        assert whole in text
    assert "crawlsched.crawl.profile_replies" in text
    for line in NEXT_STEPS.splitlines():  # commands are never wrapped mid-way
        assert line in text


def test_queue_depths_read_the_broker_including_delays_and_prefetched_messages():
    broker = StubBroker()
    release = threading.Event()

    @dramatiq.actor(broker=broker, queue_name="demo.q", max_retries=0)
    def hold():
        release.wait(30)

    for _ in range(3):
        hold.send()
    for _ in range(2):
        hold.send_with_options(delay=3_600_000)

    def depth():
        return next(d for d in queue_depths(broker) if d.queue == "demo.q")

    assert (depth().waiting, depth().delayed) == (3, 2)
    assert [d.queue for d in queue_depths(broker)] == ["demo.q"]  # no .DQ/.XQ rows

    worker = Worker(broker, worker_threads=2)  # prefetches 2 per thread
    worker.start()
    try:
        # The worker takes messages off the queue into its own buffer: qsize() drops to 0 …
        wait_for(lambda: broker.queues["demo.q"].qsize() == 0, 30, "the worker to prefetch")
        # … but none is processed yet, and the delayed ones are still to come.
        assert (depth().waiting, depth().delayed) == (3, 2)
        release.set()
        wait_for(lambda: depth().waiting == 0, 30, "the three messages to be processed")
        assert depth().delayed == 2
    finally:
        release.set()
        worker.stop()

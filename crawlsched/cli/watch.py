"""Following a run to its end (`run watch`, `run now --wait`, `crawl`): a progress bar on a
terminal (pages done of those known so far, pages per second, what waits for what), then the
run's summary, and an exit code that says how it ended."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from crawlsched.cli import discovery, ops
from crawlsched.cli.backend import Backend
from crawlsched.cli.common import backend, console, print_json
from crawlsched.cli.runs import JSON, RUN_ID, run_app

# How a run ended, as the exit code of a command that followed it (README: exit codes).
RESULT_CODES = {"succeeded": 0, "incomplete": 3, "failed": 4, "stopped": 5}
POLL_S = 0.5
# Pages per second over about this long (polls are kept this far back).
RATE_WINDOW_S = 5.0


def exit_code(result: str | None) -> int:
    return RESULT_CODES.get(result or "", 1)


def waits_text(timeline: dict[str, Any]) -> str:
    """What the run's waiting batches wait for, shortest first: `2 batches for host:…`."""
    groups = timeline.get("waiting") or []
    if not groups:
        return "nothing waits"
    first = max(groups, key=lambda g: g.get("batches", 0))
    needs = ", ".join(first.get("needs") or []) or "?"
    more = f" (+{len(groups) - 1} more)" if len(groups) > 1 else ""
    return f"{first.get('batches', 0)} batches wait for {needs}{more}"


class Rate:
    """Pages per second over the last few polls (the client's own clock: no clock skew)."""

    def __init__(self) -> None:
        self.seen: list[tuple[float, int]] = []

    def add(self, at: float, done: int) -> float:
        self.seen.append((at, done))
        while len(self.seen) > 2 and at - self.seen[1][0] >= RATE_WINDOW_S:
            self.seen.pop(0)
        (t0, d0), (t1, d1) = self.seen[0], self.seen[-1]
        return (d1 - d0) / (t1 - t0) if t1 > t0 else 0.0


def follow(
    api: Backend,
    run_id: str,
    quiet: bool = False,
    each_round: Callable[[], None] | None = None,
    label: str | None = None,
) -> int:
    """Poll the run's timeline until it ends (`each_round` after every poll), then print its
    summary (or, `quiet`, its document as JSON); its exit code."""
    rate = Rate()
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("pages · {task.fields[rate]:.1f}/s · {task.fields[waits]}"),
        TimeElapsedColumn(),
    )
    shown = console.is_terminal and not quiet
    with Progress(*columns, console=console, transient=True, disable=not shown) as progress:
        bar = progress.add_task(label or run_id, total=None, rate=0.0, waits="")
        while True:
            timeline = api.call(ops.RUN_TIMELINE, run_id=run_id)
            done = timeline["progress"]["done"]
            known = timeline["progress"]["planned"] + timeline["progress"]["discovered"]
            per_s = rate.add(time.monotonic(), done)
            progress.update(bar, completed=done, total=max(known, done) or None, rate=per_s)
            progress.update(bar, waits=waits_text(timeline))
            if each_round is not None:
                each_round()
            if timeline["ended"]:
                break
            time.sleep(POLL_S)
    run = api.call(ops.RUN, run_id=run_id)
    if quiet:
        print_json(run)
    else:
        print_summary(run, timeline)
        print_failures(api, run)
    return exit_code(run.get("result"))


SHOWN_FAILURES = 3


def print_failures(api: Backend, run: dict[str, Any]) -> None:
    """The errors of the first pages that failed on their own (the history says why)."""
    counts = run.get("counts") or {}
    for outcome in ("failed", "exhausted"):
        if not counts.get(outcome):
            continue
        rows = api.items(ops.HISTORY, SHOWN_FAILURES, run_id=run["_id"], outcome=outcome)
        for row in rows:
            console.print(f"{outcome}: {row.get('error') or row.get('job_id')}")
        if counts[outcome] > len(rows):
            console.print(
                f"… {counts[outcome] - len(rows)} more {outcome} "
                f"(`crawlsched run history --run {run['_id']}`)"
            )


def print_summary(run: dict[str, Any], timeline: dict[str, Any]) -> None:
    """How the run ended: its result and time, pages by outcome, items, what bounds cut."""
    counts = run.get("counts") or {}
    took = sum((timeline.get("stage_ms") or {}).values()) / 1000
    span = _span_s(timeline)
    result = run.get("result") or run.get("state")
    console.print(f"run {run['_id']}: {result}" + (f" in {span:.1f} s" if span is not None else ""))
    outcomes = ", ".join(f"{n} {o}" for o, n in sorted(counts.items())) or "none"
    console.print(f"pages: {sum(counts.values())} ended ({outcomes})")
    console.print(discovery.summary(run))
    for page in run.get("given_up") or []:
        console.print(f"given up: {page['url']} ({page['task']}): {page['reason']}")
    if len(run.get("by_depth") or []) > 1:
        depths = ", ".join(f"{r['depth']}: {r['done']}" for r in run["by_depth"])
        console.print(f"pages per depth: {depths}")
    if took >= 0.05:
        console.print(f"worker time: {took:.1f} s")


def _span_s(timeline: dict[str, Any]) -> float | None:
    from crawlsched.cli.text import seconds_between

    stages = timeline.get("stages") or {}
    return seconds_between(stages.get("created_at"), stages.get("ended_at"))


@run_app.command("watch")
def watch(ctx: typer.Context, run_id: str = RUN_ID, as_json: bool = JSON) -> None:
    """Follow a run to its end with a progress bar, then its summary. Exit 0 if it succeeded,
    3 incomplete, 4 failed, 5 stopped."""
    raise typer.Exit(follow(backend(ctx), run_id, quiet=as_json))

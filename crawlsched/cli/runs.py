"""`crawlsched run list` (once `runs`), `run status RUN_ID` and `run resources RUN_ID`, and
how a run is drawn: its row in a runs table, and its status."""

from __future__ import annotations

from typing import Any

import typer
from rich.table import Table

from crawlsched.cli import discovery, ops
from crawlsched.cli.common import backend, console, print_json, print_lines
from crawlsched.cli.waiting import waiting_table
from crawlsched.planning.outcomes import OUTCOME_MEANINGS, STOPPED, Outcome
from crawlsched.planning.run_control import display_state

run_app = typer.Typer(help="Runs: list them, look at one, fire, watch, stop.", no_args_is_help=True)

# "given_up" and "stopped" are shown only when a run in the table has some: the usual table
# fits 80 columns.
COUNT_COLUMNS = (*OUTCOME_MEANINGS, STOPPED)
RARE_COLUMNS = (Outcome.GIVEN_UP, STOPPED)
# Short headers so that a runs table fits 80 columns; `legend()` spells them out.
SHORT = {
    "succeeded": "ok",
    "failed": "fail",
    "exhausted": "exh",
    "expired": "exp",
    "given_up": "gup",
    "starved": "stv",
    "stopped": "stop",
}
RUN_ID = typer.Argument(..., help="As shown by `crawlsched run list`.")
JSON = typer.Option(False, "--json", help="One JSON document per line (the API's answer).")


def _columns(runs: list[dict[str, Any]]) -> tuple[str, ...]:
    rare = {c for c in RARE_COLUMNS if any(r.get("counts", {}).get(c) for r in runs)}
    return tuple(c for c in COUNT_COLUMNS if c not in RARE_COLUMNS or c in rare)


def run_row(run: dict[str, Any], columns: tuple[str, ...] = COUNT_COLUMNS) -> list[str]:
    counts = run.get("counts", {})
    run_id = run.get("_id") or run.get("run_id") or "?"
    return [
        # Schedule on one line, fire time on the next: never cut, whatever the width.
        run_id.replace("@", "\n@", 1),
        # An ended run shows how it ended: succeeded, failed, incomplete or stopped.
        # A paused run shows `paused` (its state is still `running` for the coordinator).
        run.get("result") or run["state"] if run["state"] == "finished" else display_state(run),
        str(run.get("planned", 0)),
        str(max(run.get("outstanding", 0), 0) if not run.get("planning") else "…"),
        *(str(counts.get(c, 0)) for c in columns),
    ]


def runs_table(runs: list[dict[str, Any]], title: str = "Runs") -> Table:
    columns = _columns(runs)
    # No outer frame: with three-digit counts the table still fits 80 columns.
    table = Table(title=title, show_edge=False, pad_edge=False)
    table.add_column("run", no_wrap=True)
    table.add_column("state", no_wrap=True)
    table.add_column("plan", justify="right")
    table.add_column("left", justify="right")
    for column in columns:
        table.add_column(SHORT.get(column, column), justify="right")
    for run in runs:
        table.add_row(*run_row(run, columns))
    return table


def legend() -> str:
    """What every count column means: plan, left and each outcome."""
    lines = ["plan: jobs claimed for the run; left: jobs not ended yet"]
    lines += [f"{SHORT.get(o, o)} ({o}): {meaning}" for o, meaning in OUTCOME_MEANINGS.items()]
    return "\n".join(lines)


def print_status(run: dict[str, Any]) -> None:
    """Everything `run status` says of a run (`GET /v1/runs/{run}`)."""
    console.print(runs_table([run], title=f"Run {run['_id']}"))
    console.print(discovery.summary(run))
    if run.get("discovered"):
        console.print(discovery.depth_table(run.get("by_depth") or []))
    if run.get("result"):
        console.print(f"result: {run['result']}")
    if cut := run.get("cut"):
        console.print("cut by a bound: " + ", ".join(f"{k} {v}" for k, v in cut.items()))
    for page in run.get("given_up") or []:
        console.print(f"given up: {page['url']} ({page['task']}): {page['reason']}")
    if run.get("stop_requested") or run.get("stopped_tasks"):
        what = ", ".join(run.get("stopped_tasks") or []) or "the whole run"
        stopped = (run.get("counts") or {}).get("stopped", 0)
        console.print(f"stop requested: {what}; jobs given back: {stopped}")
    if children := run.get("child_runs"):
        ended = sum(1 for c in children if c["state"] in ("finished", "stopped"))
        console.print(f"children: {ended}/{len(children)} ended (`crawlsched run children`)")
    if groups := run.get("waits_for"):
        jobs = sum(g.get("jobs", 0) for g in groups)
        console.print(waiting_table(groups, title=f"Waiting: {jobs} jobs"))
    for shortage in run.get("shortages", []):
        console.print(f"starved: {shortage['jobs']} jobs: {shortage['reason']}")
    if stages := run.get("stages_ms"):
        console.print(
            "time per stage (ms, summed over workers): "
            + ", ".join(f"{k}={v:.0f}" for k, v in stages.items())
        )


def register(app: typer.Typer) -> None:
    @run_app.command("list")
    def list_runs(
        ctx: typer.Context,
        limit: int = typer.Option(20, min=1, help="How many of the most recent runs."),
        as_json: bool = JSON,
        show_all: bool = typer.Option(
            False, "--all", help="Also the runs that planned nothing (a sweep with nothing due)."
        ),
    ) -> None:
        """The most recent runs with their counts (not those that planned nothing: --all)."""
        runs = backend(ctx).items(ops.RUNS, limit, empty=show_all)
        if as_json:
            print_lines(runs)
            return
        console.print(runs_table(runs))

    app.command("runs", hidden=True, help="Old spelling of `run list`.")(list_runs)
    app.add_typer(run_app, name="run")


@run_app.command("status")
def status(ctx: typer.Context, run_id: str = RUN_ID, as_json: bool = JSON) -> None:
    """One run: state, counts, what it waits for, and time spent per stage."""
    run = backend(ctx).call(ops.RUN, run_id=run_id)
    if as_json:
        print_json(run)
        return
    print_status(run)


@run_app.command("resources")
def resources(ctx: typer.Context, run_id: str = RUN_ID, as_json: bool = JSON) -> None:
    """Which account and which node served each batch of a run, and how long it waited."""
    rows = backend(ctx).items(ops.RUN_RESOURCES, 100_000, run_id=run_id)
    if as_json:
        print_lines(rows)
        return
    table = Table(title=f"Resources of run {run_id}")
    for column in ("task", "media", "jobs", "account", "node", "waited"):
        table.add_column(column)
    for row in rows:
        table.add_row(
            row["task"],
            row["media_name"],
            str(row["jobs"]),
            row.get("account") or "-",
            row.get("node") or "-",
            f"{row.get('waited_s', 0):.1f}s",
        )
    console.print(table)

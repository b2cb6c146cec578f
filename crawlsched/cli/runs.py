"""`crawlsched run list` (once `runs`) and `crawlsched run status RUN_ID`."""

from __future__ import annotations

from typing import Any

import typer
from rich.table import Table

from crawlsched.cli import discovery
from crawlsched.cli.common import bad_input, cli_runtime, console, print_json
from crawlsched.flow import views
from crawlsched.planning.outcomes import OUTCOME_MEANINGS, STOPPED
from crawlsched.planning.run_control import display_state
from crawlsched.runtime import Runtime

run_app = typer.Typer(help="Runs: list them, look at one, fire, stop.", no_args_is_help=True)

# "stopped" is shown only when a run in the table has some: the usual table fits 80 columns.
COUNT_COLUMNS = (*OUTCOME_MEANINGS, STOPPED)
RARE_COLUMNS = (STOPPED,)
# Short headers so that a runs table fits 80 columns; `legend()` spells them out.
SHORT = {
    "succeeded": "ok",
    "failed": "fail",
    "exhausted": "exh",
    "expired": "exp",
    "given_up": "gup",
    "starved": "starv",
    "stopped": "stop",
}


def _columns(runs: list[dict[str, Any]]) -> tuple[str, ...]:
    rare = {c for c in RARE_COLUMNS if any(r.get("counts", {}).get(c) for r in runs)}
    return tuple(c for c in COUNT_COLUMNS if c not in RARE_COLUMNS or c in rare)


def run_row(run: dict[str, Any], columns: tuple[str, ...] = COUNT_COLUMNS) -> list[str]:
    counts = run.get("counts", {})
    return [
        # Schedule on one line, fire time on the next: never cut, whatever the width.
        run["_id"].replace("@", "\n@", 1),
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


def require_run(rt: Runtime, run_id: str) -> dict[str, Any]:
    """The run, or one line and exit code 2."""
    run = rt.runs.get(run_id)
    if run is None:
        bad_input(f"no run with id {run_id!r}")
    return run


def register(app: typer.Typer) -> None:
    @run_app.command("list")
    def list_runs(
        limit: int = typer.Option(20, min=1, help="How many of the most recent runs."),
        as_json: bool = typer.Option(False, "--json", help="One JSON document per line."),
        show_all: bool = typer.Option(
            False, "--all", help="Also the runs that planned nothing (a sweep with nothing due)."
        ),
    ) -> None:
        """The most recent runs with their counts (not those that planned nothing: --all)."""
        with cli_runtime() as rt:
            runs = rt.runs.recent(limit, empty=show_all)
            if as_json:
                for run in runs:
                    print_json(run)
                return
            console.print(runs_table(runs))

    app.command("runs", hidden=True, help="Old spelling of `run list`.")(list_runs)
    app.add_typer(run_app, name="run")


@run_app.command("status")
def status(
    run_id: str = typer.Argument(..., help="As shown by `crawlsched run list`."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """One run: state, counts, and time spent per stage."""
    with cli_runtime() as rt:
        run = require_run(rt, run_id)
        children = rt.runs.children_of(run_id) if run.get("children") else []
        if as_json:
            print_json(views.run_details(rt, run))
            return
        console.print(runs_table([run], title=f"Run {run_id}"))
        console.print(discovery.summary(run))
        if run.get("discovered"):
            console.print(discovery.depth_table(discovery.by_depth(rt, run)))
        if run.get("result"):
            console.print(f"result: {run['result']}")
        if cut := run.get("cut"):
            console.print("cut by a bound: " + ", ".join(f"{k} {v}" for k, v in cut.items()))
        for page in views.given_up_named(rt, run):
            console.print(f"given up: {page['url']} ({page['task']}): {page['reason']}")
        if run.get("stop_requested") or run.get("stopped_tasks"):
            what = ", ".join(run.get("stopped_tasks") or []) or "the whole run"
            console.print(
                f"stop requested: {what}; jobs given back: {run['counts'].get('stopped', 0)}"
            )
        if children:
            ended = sum(1 for c in children if c["state"] in ("finished", "stopped"))
            console.print(f"children: {ended}/{len(children)} ended (`crawlsched run children`)")
        from crawlsched.cli.pools import waiting_table

        waiting = rt.waiting.for_run(run_id)
        if waiting:
            jobs = sum(doc.get("jobs", 0) for doc in waiting)
            console.print(waiting_table(rt, waiting, title=f"Waiting: {jobs} jobs"))
        for shortage in run.get("shortages", []):
            console.print(f"starved: {shortage['jobs']} jobs: {shortage['reason']}")
        stages = run.get("stages_ms", {})
        if stages:
            console.print(
                "time per stage (ms, summed over workers): "
                + ", ".join(f"{k}={v:.0f}" for k, v in stages.items())
            )


@run_app.command("resources")
def resources(
    run_id: str = typer.Argument(..., help="As shown by `crawlsched run list`."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Which account and which node served each batch of a run, and how long it waited."""
    with cli_runtime() as rt:
        require_run(rt, run_id)
        rows = rt.assignments.for_run(run_id)
        if as_json:
            for row in rows:
                print_json(row)
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

"""`crawlsched run pause|resume|retry-failed RUN`: hold a run's work, let it go, crawl again
the pages that failed on their own."""

from __future__ import annotations

import typer

from crawlsched.cli import ops
from crawlsched.cli.common import backend, console, print_json
from crawlsched.cli.runs import JSON, RUN_ID, run_app


def _when(sent: bool) -> str:
    return "now" if sent else "on the next tick"


@run_app.command("pause")
def pause(ctx: typer.Context, run_id: str = RUN_ID, as_json: bool = JSON) -> None:
    """Pause a run: nothing more is dispatched; crawls under way finish; its pages wait."""
    done = backend(ctx).call(ops.RUN_PAUSE, run_id=run_id)
    if as_json:
        print_json(done)
    elif done["already_paused"]:
        console.print(f"run {run_id} is already paused: nothing changed")
    else:
        console.print(
            f"paused {', '.join(done['paused'])}; {done['held_jobs']} waiting jobs held; "
            "crawls under way finish"
        )


@run_app.command("resume")
def resume(ctx: typer.Context, run_id: str = RUN_ID, as_json: bool = JSON) -> None:
    """Resume a paused run: what waited is planned and dispatched again."""
    done = backend(ctx).call(ops.RUN_RESUME, run_id=run_id)
    if as_json:
        print_json(done)
        return
    if not done["was_paused"]:
        console.print(f"run {run_id} was not paused: nothing changed")
        return
    runs = ", ".join(done["resumed"])
    left = f"{done['outstanding']} pages still to crawl"
    if done["waiting_jobs"]:
        when = _when(done["pass_sent"])
        console.print(f"resumed {runs}; {done['waiting_jobs']} held pages planned {when}; {left}")
    else:
        # Nothing had been held back yet: the crawls under way went on through the pause.
        console.print(f"resumed {runs}; no page was held back; {left}")


@run_app.command("retry-failed")
def retry_failed(ctx: typer.Context, run_id: str = RUN_ID, as_json: bool = JSON) -> None:
    """Crawl again, in the same run, the pages whose last try failed on their own (failed
    or exhausted); a finished run is reopened and ends once more."""
    done = backend(ctx).call(ops.RUN_RETRY_FAILED, run_id=run_id)
    if as_json:
        print_json(done)
        return
    pages = sum(done["pages"].values())
    what = ", ".join(f"{n} {outcome}" for outcome, n in sorted(done["pages"].items()))
    again = "reopened" if done["reopened"] else "still running"
    console.print(
        f"retrying {pages} pages ({what}) in run {run_id} ({again}), planned "
        f"{_when(done['pass_sent'])}"
    )

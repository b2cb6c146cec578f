"""`crawlsched run pause|resume|retry-failed RUN`: hold a run's work, let it go, crawl again
the pages that failed on their own."""

from __future__ import annotations

import typer

from crawlsched.cli.common import (
    bad_input,
    cli_runtime,
    console,
    ensure_broker,
    print_json,
    sends_messages,
)
from crawlsched.cli.runs import require_run, run_app
from crawlsched.errors import CrawlschedError
from crawlsched.flow.pausing import PlanPass
from crawlsched.logs import get_logger
from crawlsched.runtime import Runtime

log = get_logger(__name__)


def _plan_pass(rt: Runtime) -> tuple[PlanPass, bool]:
    """The sender of a run's own pass, and whether it reaches a worker. Without one (a stub
    broker) the ticker's sweep plans the waiting pages on its next tick."""
    ensure_broker()  # also points the flow's log lines at stderr, never into the output
    if not sends_messages(rt.settings):

        def by_the_ticker(run_id: str, collection: str) -> None:
            log.info("run_pass_left_to_ticker", run_id=run_id, collection=collection)

        return by_the_ticker, False
    from crawlsched.actors.sends import send_plan_children

    return send_plan_children, True


@run_app.command("pause")
def pause(
    run_id: str = typer.Argument(..., help="As shown by `crawlsched run list`."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Pause a run: nothing more is dispatched; crawls under way finish; its pages wait."""
    from crawlsched.flow.pausing import pause_run

    with cli_runtime() as rt:
        require_run(rt, run_id)
        ensure_broker()  # points the flow's log lines at stderr, never into the output
        try:
            summary = pause_run(rt, run_id)
        except CrawlschedError as e:
            bad_input(str(e))
        if as_json:
            print_json(
                {
                    "paused": summary.runs,
                    "already_paused": summary.already,
                    "held_batches": summary.held_batches,
                    "held_jobs": summary.held_jobs,
                }
            )
        elif summary.already:
            console.print(f"run {run_id} is already paused: nothing changed")
        else:
            console.print(
                f"paused {', '.join(summary.runs)}; {summary.held_jobs} waiting jobs held; "
                "crawls under way finish"
            )


@run_app.command("resume")
def resume(
    run_id: str = typer.Argument(..., help="As shown by `crawlsched run list`."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Resume a paused run: what waited is planned and dispatched again."""
    from crawlsched.actors.sends import send_webhook
    from crawlsched.flow.pausing import resume_run

    with cli_runtime() as rt:
        require_run(rt, run_id)
        plan_pass, sent = _plan_pass(rt)
        try:
            summary = resume_run(rt, run_id, plan_pass, send_webhook if sent else None)
        except CrawlschedError as e:
            bad_input(str(e))
        if as_json:
            print_json(
                {
                    "resumed": summary.runs,
                    "was_paused": not summary.already,
                    "waiting_jobs": summary.held_jobs,
                }
            )
        elif summary.already:
            console.print(f"run {run_id} was not paused: nothing changed")
        else:
            when = "now" if sent else "on the next tick"
            console.print(
                f"resumed {', '.join(summary.runs)}; {summary.held_jobs} waiting jobs "
                f"planned {when}"
            )


@run_app.command("retry-failed")
def retry_failed(
    run_id: str = typer.Argument(..., help="As shown by `crawlsched run list`."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Crawl again, in the same run, the pages whose last try failed on their own (failed
    or exhausted); a finished run is reopened and ends once more."""
    from crawlsched.flow.retrying import retry_failed as retry

    with cli_runtime() as rt:
        require_run(rt, run_id)
        plan_pass, sent = _plan_pass(rt)
        try:
            summary = retry(rt, run_id, plan_pass)
        except CrawlschedError as e:
            bad_input(str(e))
        pages = sum(summary.pages.values())
        if as_json:
            print_json({"run_id": run_id, "reopened": summary.reopened, "pages": summary.pages})
            return
        what = ", ".join(f"{n} {outcome}" for outcome, n in sorted(summary.pages.items()))
        again = "reopened" if summary.reopened else "still running"
        when = "now" if sent else "on the next tick"
        console.print(f"retrying {pages} pages ({what}) in run {run_id} ({again}), planned {when}")

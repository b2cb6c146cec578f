"""`crawlsched schedules add|list|show|update|pause|unpause|stop|delete|next|missed`."""

from __future__ import annotations

import math
from typing import Any

import typer
from rich.table import Table

from crawlsched.cli import ops
from crawlsched.cli.common import backend, bad_input, console, print_json, print_lines
from crawlsched.cli.text import moment, when

app = typer.Typer(help="Create, change and inspect schedules.", no_args_is_help=True)

JSON = typer.Option(False, "--json", help="JSON instead of a table.")
EVERY = typer.Option(None, "--every", help="Interval trigger: seconds between fire times.")
CRON = typer.Option(None, "--cron", help="Cron trigger, 5 fields, e.g. '30 2 * * 1-5'.")
TZ = typer.Option(None, "--tz", help="IANA time zone of --cron (default UTC).")
AT = typer.Option(None, "--at", help="One-time trigger: ISO date and time with a zone.")
COLLECTION = typer.Option(None, "--collection", help="Sweep this job collection (repeatable).")
TARGET_COLLECTION = typer.Option(None, "--target-collection", help="Collection of --target.")
TARGET = typer.Option(None, "--target", help="Fire only this target's jobs (repeatable).")
OWNER = typer.Option(None, "--owner", help="Who the schedule belongs to.")
MISFIRE = typer.Option(None, "--misfire", help="skip, run_once (default) or catch_up.")
CATCH_UP = typer.Option(None, "--catch-up-limit", help="Late fire times catch_up replays.")
OVERLAP = typer.Option(None, "--overlap", help="allow (default), skip or buffer_one.")
SHARDS = typer.Option(None, "--shards", help="Split each firing into N child runs (1-64).")
WEBHOOK = typer.Option(
    None, "--webhook", help="URL to POST to when a run ends; '' removes it (update)."
)
NOTICE = typer.Option(
    None,
    "--notice",
    help="Apprise URL told of run ends, e.g. tgram://TOKEN/CHAT (repeatable; replaces the "
    "schedule's list; '' removes them all).",
)
NOTIFY_ON = typer.Option(
    None,
    "--notify-on",
    help="Run ends the webhook and notices are told of: finished, failed, incomplete, stopped.",
)


# The longest interval a schedule takes (`schedules.spec.MAX_INTERVAL_S`): ten years.
MAX_EVERY_S = 10 * 365 * 86400
ALL = 10_000_000


# Command-line option -> schedule field.
FIELDS = {
    "every": "interval_s",
    "cron": "cron",
    "tz": "timezone",
    "at": "at",
    "collection": "collections",
    "target_collection": "target_collection",
    "target": "targets",
    "owner": "owner",
    "misfire": "misfire",
    "catch_up_limit": "catch_up_limit",
    "overlap": "overlap",
    "shards": "shards",
    "webhook": "webhook",
    "notice": "notices",
    "notify_on": "notify_on",
}


def _given(options: dict[str, Any]) -> dict[str, Any]:
    """The schedule fields the options give (unset options left out; `--notice ''` alone
    removes every notice target, as an empty list)."""
    given = {FIELDS[k]: v for k, v in options.items() if k in FIELDS and v not in (None, [])}
    every = given.get("interval_s")
    if every is not None and not (math.isfinite(every) and 0 < every <= MAX_EVERY_S):
        bad_input(
            f"--every: seconds between fire times, more than 0 and at most {MAX_EVERY_S} "
            f"(10 years), got {every:g}"
        )
    if "notices" in given:
        given["notices"] = [url for url in given["notices"] if url]
    return given


def _print(doc: dict[str, Any], as_json: bool, message: str) -> None:
    if as_json:
        print_json(doc)
    else:
        console.print(message)


def _trigger_text(doc: dict[str, Any]) -> str:
    kind = doc.get("trigger", "interval")
    if kind == "cron":
        return f"cron '{doc['cron']}' {doc.get('timezone', 'UTC')}"
    if kind == "once":
        return f"once at {when(doc.get('at'))}"
    return f"every {doc['interval_s']:g}s"


def _made(doc: dict[str, Any]) -> str:
    return f"{doc['_id']}: {_trigger_text(doc)}, next {when(doc.get('next_fire_at'))}"


@app.command("add")
def add(
    ctx: typer.Context,
    schedule_id: str = typer.Argument(..., help="A name of your choice, e.g. nightly-sites."),
    every: float | None = EVERY,
    cron: str | None = CRON,
    tz: str | None = TZ,
    at: str | None = AT,
    collection: list[str] | None = COLLECTION,
    target_collection: str | None = TARGET_COLLECTION,
    target: list[str] | None = TARGET,
    owner: str | None = OWNER,
    misfire: str | None = MISFIRE,
    catch_up_limit: int | None = CATCH_UP,
    overlap: str | None = OVERLAP,
    shards: int | None = SHARDS,
    webhook: str | None = WEBHOOK,
    notice: list[str] | None = NOTICE,
    notify_on: list[str] | None = NOTIFY_ON,
    as_json: bool = JSON,
) -> None:
    """Create a schedule: a sweep of collections, or a set of targets."""
    given = _given(locals())
    doc = backend(ctx).call(ops.SCHEDULE_ADD, id=schedule_id, **given)
    _print(doc, as_json, _made(doc))


@app.command("update")
def update(
    ctx: typer.Context,
    schedule_id: str = typer.Argument(...),
    every: float | None = EVERY,
    cron: str | None = CRON,
    tz: str | None = TZ,
    at: str | None = AT,
    collection: list[str] | None = COLLECTION,
    target_collection: str | None = TARGET_COLLECTION,
    target: list[str] | None = TARGET,
    owner: str | None = OWNER,
    misfire: str | None = MISFIRE,
    catch_up_limit: int | None = CATCH_UP,
    overlap: str | None = OVERLAP,
    shards: int | None = SHARDS,
    webhook: str | None = WEBHOOK,
    notice: list[str] | None = NOTICE,
    notify_on: list[str] | None = NOTIFY_ON,
    as_json: bool = JSON,
) -> None:
    """Change a schedule; a new trigger restarts its fire times from now."""
    changes = _given(locals())
    if not changes:
        bad_input("nothing to change: give at least one option")
    doc = backend(ctx).call(ops.SCHEDULE_UPDATE, schedule_id=schedule_id, **changes)
    _print(doc, as_json, _made(doc))


def _state_command(name: str, operation: Any, help_text: str) -> None:
    @app.command(name, help=help_text)
    def command(
        ctx: typer.Context, schedule_id: str = typer.Argument(...), as_json: bool = JSON
    ) -> None:
        doc = backend(ctx).call(operation, schedule_id=schedule_id)
        _print(doc, as_json, f"{schedule_id}: {doc['state']}")


_state_command("pause", ops.SCHEDULE_PAUSE, "Stop firing until unpaused (misses are recorded).")
_state_command("unpause", ops.SCHEDULE_UNPAUSE, "Fire again; the paused fire times are missed.")
_state_command("stop", ops.SCHEDULE_STOP, "Stop for good: never fires again, stays listed.")
_state_command("delete", ops.SCHEDULE_DELETE, "Delete: hidden, and every later change refused.")


@app.command("list")
def list_schedules(
    ctx: typer.Context,
    owner: str | None = OWNER,
    include_deleted: bool = typer.Option(False, "--all", help="Include deleted schedules."),
    as_json: bool = JSON,
) -> None:
    """Schedules, with their trigger, state and next fire time."""
    docs = backend(ctx).items(
        ops.SCHEDULES, ALL, owner=owner, include_deleted=include_deleted or None
    )
    if as_json:
        print_lines(docs)
        return
    table = Table(title="Schedules")
    for column in ("id", "owner", "fires", "trigger", "state", "next", "fired", "missed"):
        table.add_column(column)
    table.columns[0].no_wrap = True  # an id is one word
    for doc in docs:
        table.add_row(
            doc["_id"],
            doc.get("owner") or "default",
            ", ".join(doc.get("collections", []))
            + (f" ({len(doc['targets'])} targets)" if doc.get("targets") else ""),
            _trigger_text(doc),
            doc.get("state", "active"),
            when(doc.get("next_fire_at")),
            str(doc.get("fired", 0)),
            str(doc.get("missed", 0)),
        )
    console.print(table)


@app.command("show")
def show(ctx: typer.Context, schedule_id: str = typer.Argument(...), as_json: bool = JSON) -> None:
    """One schedule, every field."""
    doc = backend(ctx).call(ops.SCHEDULE, schedule_id=schedule_id)
    if as_json:
        print_json(doc)
        return
    for key, value in doc.items():
        console.print(f"{key}: {when(value) if moment(value) else value}")


@app.command("next")
def next_runs(
    ctx: typer.Context,
    schedule_id: str | None = typer.Argument(None, help="One schedule; default: all."),
    owner: str | None = OWNER,
    days: float | None = typer.Option(None, "--days", help="Horizon (default 3 days)."),
    limit: int = typer.Option(50, min=1, max=100_000, help="At most this many rows."),
    as_json: bool = JSON,
) -> None:
    """Upcoming fire times within the horizon, per schedule or per owner."""
    if days is not None and not (math.isfinite(days) and 0 < days <= 31):
        bad_input(f"--days: more than 0 and at most 31, got {days:g}")
    api = backend(ctx)
    if schedule_id is not None:
        rows = api.items(ops.SCHEDULE_UPCOMING, limit, schedule_id=schedule_id, days=days)
    else:
        rows = api.items(ops.UPCOMING, limit, owner=owner, days=days)
    if as_json:
        print_lines(rows)
        return
    table = Table(title=f"Upcoming runs ({days if days is not None else 3:g} days)")
    table.add_column("fire at (UTC)")
    table.add_column("schedule")
    for row in rows:
        table.add_row(when(row["fire_at"]), row["schedule_id"])
    console.print(table)


@app.command("missed")
def missed(
    ctx: typer.Context,
    schedule_id: str | None = typer.Argument(None, help="One schedule; default: all."),
    owner: str | None = OWNER,
    limit: int = typer.Option(100, min=1, max=100_000),
    as_json: bool = JSON,
) -> None:
    """Fire times that did not run as planned, newest first, with why."""
    api = backend(ctx)
    if schedule_id is not None:
        rows = api.items(ops.SCHEDULE_MISSED, limit, schedule_id=schedule_id)
    else:
        rows = api.items(ops.MISSED, limit, owner=owner)
    if as_json:
        print_lines(rows)
        return
    table = Table(title="Missed runs")
    for column in ("fire at", "schedule", "reason", "detail"):
        table.add_column(column)
    for row in rows:
        detail = ", ".join(row.get("pools", [])) or row.get("detail") or ""
        table.add_row(when(row["fire_at"]), row["schedule_id"], row["reason"], detail)
    console.print(table)


@app.command("fire")
def fire(
    ctx: typer.Context,
    schedule_id: str = typer.Argument(..., help="e.g. sweep-profiles or sweep-websites"),
) -> None:
    """Make a schedule due now; the next tick fires it (`run now` fires it at once)."""
    backend(ctx).call(ops.SCHEDULE_FIRE, schedule_id=schedule_id)
    console.print(f"{schedule_id} is due; it fires on the next tick")

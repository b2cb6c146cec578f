"""`crawlsched schedules add|list|show|update|pause|unpause|stop|delete|next|missed`."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import typer
from rich.table import Table

from crawlsched.cli.common import cli_runtime, console, print_error, print_json
from crawlsched.errors import ScheduleNotFound
from crawlsched.flow import schedule_ops
from crawlsched.flow.job_ops import empty_store_hint
from crawlsched.runtime import Runtime
from crawlsched.schedules.spec import horizon

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
NOTIFY_ON = typer.Option(
    None, "--notify-on", help="Run ends the webhook is told of: finished, failed, stopped."
)


@contextmanager
def _runtime() -> Iterator[Runtime]:
    """Bad input, unknown or deleted schedules: one red line and exit code 2."""
    with cli_runtime() as rt:
        try:
            yield rt
        except (ValueError, LookupError) as e:
            print_error(str(e))
            raise typer.Exit(2) from None


def _at(value: str | None) -> datetime | None:
    if value is None:
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(f"at: not an ISO date and time: {value!r}") from None


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
    "notify_on": "notify_on",
}


def _given(options: dict[str, Any]) -> dict[str, Any]:
    """The schedule fields the options give (unset options left out)."""
    given = {FIELDS[k]: v for k, v in options.items() if k in FIELDS and v not in (None, [])}
    if "at" in given:
        given["at"] = _at(given["at"])
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
        return f"once at {doc['at']:%Y-%m-%d %H:%M:%S%z}"
    return f"every {doc['interval_s']:g}s"


def _summary(doc: dict[str, Any]) -> str:
    return f"{doc['_id']}: {_trigger_text(doc)}, next {_when(doc.get('next_fire_at'))}"


def _when(value: datetime | None) -> str:
    return "-" if value is None else f"{value.astimezone(UTC):%Y-%m-%d %H:%M:%S}Z"


@app.command("add")
def add(
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
    notify_on: list[str] | None = NOTIFY_ON,
    as_json: bool = JSON,
) -> None:
    """Create a schedule: a sweep of collections, or a set of targets."""
    with _runtime() as rt:
        given = _given(locals())
        doc = schedule_ops.create(rt, schedule_id, given)
        _print(
            doc, as_json, f"{schedule_id}: {_trigger_text(doc)}, next {_when(doc['next_fire_at'])}"
        )


@app.command("update")
def update(
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
    notify_on: list[str] | None = NOTIFY_ON,
    as_json: bool = JSON,
) -> None:
    """Change a schedule; a new trigger restarts its fire times from now."""
    with _runtime() as rt:
        changes = _given(locals())
        if not changes:
            raise ValueError("nothing to change: give at least one option")
        doc = schedule_ops.update(rt, schedule_id, changes)
        _print(
            doc, as_json, f"{schedule_id}: {_trigger_text(doc)}, next {_when(doc['next_fire_at'])}"
        )


def _state_command(name: str, operation: Any, help_text: str) -> None:
    @app.command(name, help=help_text)
    def command(schedule_id: str = typer.Argument(...), as_json: bool = JSON) -> None:
        with _runtime() as rt:
            doc = operation(rt, schedule_id)
            _print(doc, as_json, f"{schedule_id}: {doc['state']}")


_state_command("pause", schedule_ops.pause, "Stop firing until unpaused (misses are recorded).")
_state_command("unpause", schedule_ops.unpause, "Fire again; the paused fire times are missed.")
_state_command("stop", schedule_ops.stop, "Stop for good: never fires again, stays listed.")
_state_command("delete", schedule_ops.delete, "Delete: hidden, and every later change refused.")


@app.command("list")
def list_schedules(
    owner: str | None = OWNER,
    include_deleted: bool = typer.Option(False, "--all", help="Include deleted schedules."),
    as_json: bool = JSON,
) -> None:
    """Schedules, with their trigger, state and next fire time."""
    with _runtime() as rt:
        docs = rt.schedules.for_owner(owner, include_deleted)
        if as_json:
            for doc in docs:
                print_json(doc)
            return
        table = Table(title="Schedules")
        for column in ("id", "owner", "fires", "trigger", "state", "next", "fired", "missed"):
            table.add_column(column)
        for doc in docs:
            table.add_row(
                doc["_id"],
                doc.get("owner") or "default",
                ", ".join(doc.get("collections", []))
                + (f" ({len(doc['targets'])} targets)" if doc.get("targets") else ""),
                _trigger_text(doc),
                doc.get("state", "active"),
                _when(doc.get("next_fire_at")),
                str(doc.get("fired", 0)),
                str(doc.get("missed", 0)),
            )
        console.print(table)


@app.command("show")
def show(schedule_id: str = typer.Argument(...), as_json: bool = JSON) -> None:
    """One schedule, every field."""
    with _runtime() as rt:
        doc = rt.schedules.require(schedule_id, "show", ("active", "paused", "stopped", "done"))
        if as_json:
            print_json(doc)
            return
        for key, value in doc.items():
            console.print(f"{key}: {value}")


@app.command("next")
def next_runs(
    schedule_id: str | None = typer.Argument(None, help="One schedule; default: all."),
    owner: str | None = OWNER,
    days: float | None = typer.Option(None, "--days", help="Horizon (default 3 days)."),
    limit: int = typer.Option(50, min=1, max=100_000, help="At most this many rows."),
    as_json: bool = JSON,
) -> None:
    """Upcoming fire times within the horizon, per schedule or per owner."""
    with _runtime() as rt:
        span = horizon(days if days is not None else rt.settings.schedule_horizon_days)
        if schedule_id is not None:
            docs = [rt.schedules.require(schedule_id, "list runs of", ("active", "paused"))]
        else:
            docs = rt.schedules.for_owner(owner)
        rows = schedule_ops.upcoming_runs(rt, docs, span)[:limit]
        if as_json:
            for sid, fire_at in rows:
                print_json({"schedule_id": sid, "fire_at": fire_at})
            return
        table = Table(title=f"Upcoming runs ({span.total_seconds() / 86400:g} days)")
        table.add_column("fire at (UTC)")
        table.add_column("schedule")
        for sid, fire_at in rows:
            table.add_row(_when(fire_at), sid)
        console.print(table)


@app.command("missed")
def missed(
    schedule_id: str | None = typer.Argument(None, help="One schedule; default: all."),
    owner: str | None = OWNER,
    limit: int = typer.Option(100, min=1, max=100_000),
    as_json: bool = JSON,
) -> None:
    """Fire times that did not run as planned, newest first, with why."""
    with _runtime() as rt:
        if schedule_id is not None and rt.schedules.get(schedule_id) is None:
            raise ScheduleNotFound(schedule_id)
        rows = rt.missed_runs.list(schedule_id, owner, limit)
        if as_json:
            for row in rows:
                print_json(row)
            return
        table = Table(title="Missed runs")
        for column in ("fire at", "schedule", "reason", "detail"):
            table.add_column(column)
        for row in rows:
            detail = ", ".join(row.get("pools", [])) or row.get("detail") or ""
            table.add_row(_when(row["fire_at"]), row["schedule_id"], row["reason"], detail)
        console.print(table)


@app.command("fire")
def fire(
    schedule_id: str = typer.Argument(..., help="e.g. sweep-profiles or sweep-websites"),
) -> None:
    """Make a schedule due now; the next tick fires it (`run now` fires it at once)."""
    with cli_runtime() as rt:
        if not rt.schedules.fire_now(schedule_id, rt.now()):
            known = ", ".join(s["_id"] for s in rt.schedules.all()) or empty_store_hint(rt)
            raise typer.BadParameter(f"no schedule {schedule_id!r}; known: {known}")
        console.print(f"{schedule_id} is due; it fires on the next tick")

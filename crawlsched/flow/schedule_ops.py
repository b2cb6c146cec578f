"""Schedule operations: create, update, pause, unpause, stop, delete; upcoming runs.

Each checks everything before it writes (nothing is stored half-way), writes with a
compare-and-set on the state it read, then emits its event (ScheduleCreated, …).

States: active → paused ⇄ active; active|paused → stopped (for good: it never fires again but
stays listed with its history); any → deleted (hidden from lists; every later operation is
refused). A one-time schedule that fired is `done`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

from crawlsched import metrics
from crawlsched.events import emit
from crawlsched.flow.destinations import check_when_set, url_host
from crawlsched.planning.run_names import run_id_for
from crawlsched.runtime import Runtime
from crawlsched.schedules.policies import MissedReason, due_times
from crawlsched.schedules.spec import apply_update, build_schedule
from crawlsched.schedules.triggers import trigger_of
from crawlsched.schedules.upcoming import UPCOMING_LIMIT, FireTimeCache, upcoming_rows

LIVE = ("active", "paused")


def _seal(rt: Runtime, notify: dict[str, Any] | None) -> None:
    """Encrypt in place the URL of a new webhook and of each new notice target (they hold
    the services' secrets), after the servers they name passed the network rule
    (UnsafeTarget, a ValueError, naming the redacted form). Stored ones are sealed already."""
    if not notify:
        return
    webhook = notify.get("webhook")
    if isinstance(webhook, dict) and "url" in webhook:
        check_when_set([url_host(webhook["url"])], rt.allowed_networks, webhook["shown"])
        notify["webhook"] = {
            "secret": rt.secrets.encrypt(webhook["url"]),
            "shown": webhook["shown"],
        }
    for entry in notify.get("notices") or []:
        if "url" not in entry:
            continue
        hosts = [(str(host), int(port)) for host, port in entry.pop("hosts", [])]
        check_when_set(hosts, rt.allowed_networks, entry["shown"])
        entry["secret"] = rt.secrets.encrypt(entry.pop("url"))


def create(rt: Runtime, schedule_id: str, given: Mapping[str, Any]) -> dict[str, Any]:
    doc = build_schedule(schedule_id, given, rt.now())
    _seal(rt, doc.get("notify"))
    rt.schedules.insert(doc)
    emit(rt, "ScheduleCreated", schedule_id=schedule_id, owner=doc["owner"])
    return doc


def update(rt: Runtime, schedule_id: str, changes: Mapping[str, Any]) -> dict[str, Any]:
    doc = rt.schedules.require(schedule_id, "update", LIVE)
    fields = apply_update(doc, changes, rt.now())
    _seal(rt, fields.get("notify"))
    fields["updated_at"] = rt.now()
    if doc.get("state", "active") == "paused":
        fields["enabled"] = False
    updated = rt.schedules.transition(doc, "update", fields)
    emit(rt, "ScheduleUpdated", schedule_id=schedule_id, fields=sorted(changes))
    return updated


def _switch_off(
    rt: Runtime, schedule_id: str, operation: str, allowed: tuple[str, ...], state: str, event: str
) -> dict[str, Any]:
    """Pause, stop or delete: the schedule stops firing, stamped with when."""
    doc = rt.schedules.require(schedule_id, operation, allowed)
    now = rt.now()
    fields = {"state": state, "enabled": False, f"{state}_at": now, "updated_at": now}
    changed = rt.schedules.transition(doc, operation, fields)
    emit(rt, event, schedule_id=schedule_id)
    return changed


def pause(rt: Runtime, schedule_id: str) -> dict[str, Any]:
    return _switch_off(rt, schedule_id, "pause", ("active",), "paused", "SchedulePaused")


def unpause(rt: Runtime, schedule_id: str) -> dict[str, Any]:
    """Fire times that fell in the pause are recorded missed (reason paused), one by one."""
    doc = rt.schedules.require(schedule_id, "unpause", ("paused",))
    now = rt.now()
    trigger = trigger_of(doc)
    missed: list[datetime] = []
    following = doc.get("next_fire_at")
    if following is not None:
        # Times before now were missed; one due exactly now fires at the next tick.
        before_now = now - timedelta(microseconds=1)
        missed, following, _ = due_times(trigger, following, before_now)
        if following is not None and following <= before_now:  # more than the cap were missed
            following = trigger.next_after(before_now)
    fields: dict[str, Any] = {
        "state": "active" if following is not None else "done",
        "enabled": following is not None,
        "next_fire_at": following,
        "updated_at": now,
    }
    unpaused = rt.schedules.transition(doc, "unpause", fields)
    rt.missed_runs.record(doc, [(t, MissedReason.PAUSED) for t in missed], now)
    metrics.missed_runs(MissedReason.PAUSED.value, len(missed))
    emit(rt, "ScheduleUnpaused", schedule_id=schedule_id, missed=len(missed))
    return unpaused


def stop(rt: Runtime, schedule_id: str) -> dict[str, Any]:
    return _switch_off(rt, schedule_id, "stop", LIVE, "stopped", "ScheduleStopped")


def delete(rt: Runtime, schedule_id: str) -> dict[str, Any]:
    allowed = (*LIVE, "stopped", "done")
    return _switch_off(rt, schedule_id, "delete", allowed, "deleted", "ScheduleDeleted")


def upcoming_runs(
    rt: Runtime,
    schedules: list[dict[str, Any]],
    horizon: timedelta,
    limit: int = UPCOMING_LIMIT,
    known: FireTimeCache | None = None,
) -> list[tuple[str, datetime]]:
    """(schedule id, fire time) of active schedules within `horizon` of now, in time order;
    at most `limit` per schedule (a page never needs more than its end). A long-lived caller
    passes the `FireTimeCache` it keeps."""
    return upcoming_rows(schedules, rt.now(), horizon, limit, known)


def run_now(rt: Runtime, schedule_id: str, send_plan: Callable[[str, str], Any]) -> str:
    """A one-time run of a schedule, now: its planning message sent, then its run document
    opened (as the planner opens it: the same upsert, so either may come first). Returns the
    run's id. Opened before the caller answers, the run is in the store whatever becomes of
    the message: the standalone server, whose in-process messages a `kill -9` loses, plans a
    run still `planning` again when it starts (`flow/restart.py`), and its answer waits for a
    snapshot that holds the run. Sent first, a message the broker refuses leaves no run that
    nothing will plan."""
    fire_at = rt.now()
    send_plan(schedule_id, fire_at.isoformat())
    run_id = run_id_for(schedule_id, fire_at)
    rt.runs.open(run_id, schedule_id, fire_at, rt.now())
    return run_id

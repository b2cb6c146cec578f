"""Run-end notices to the Apprise targets a schedule names (`notify.notices`).

Each target of a schedule gets its own delivery record in the webhook outbox
(`webhook_deliveries`, `kind: notice`, id `<run id>:<event>:notice:<n>`), so a notice rides
the same at-least-once machinery as a webhook: the `deliver_webhook` actor's retries with
backoff, the relay for records whose message was lost, and the record's state so a copy of
the message after a success sends nothing. The record holds the target's URL encrypted, as
the schedule does; it is decrypted only to send, and never logged: logs and errors name the
target by its redacted form.
"""

from __future__ import annotations

from typing import Any

from crawlsched.outbound.socket_guard import only_allowed
from crawlsched.planning.run_end import RunEnd
from crawlsched.runtime import Runtime
from crawlsched.schedules.notice_urls import parse_notice_url, scrub

NOTICE = "notice"
# How long a sender holds a notice's delivery record; Apprise is given less, so no second
# sender takes the record while the first may still be talking to the service.
NOTICE_HOLD_S = 60.0
NOTICE_TIMEOUT_S = 45.0
# Apprise's notify types (`apprise.NotifyType` values) per run result; `warning` otherwise.
_TYPES = {"succeeded": "success", "failed": "failure", "incomplete": "failure"}


def notice_text(run: dict[str, Any], end: RunEnd, given_up: int) -> tuple[str, str]:
    """(title, body) of a run's end: its schedule, result and counts, in a few short lines."""
    schedule_id = run.get("schedule_id") or "-"
    counts = run.get("counts") or {}
    shown = ", ".join(f"{name} {n}" for name, n in sorted(counts.items())) or "no pages"
    lines = [
        f"Run {run['_id']} of schedule {schedule_id} ended: {end.result}.",
        f"Pages planned {run.get('planned', 0)}, discovered {run.get('discovered', 0)}.",
        f"Outcomes: {shown}.",
    ]
    if cut := run.get("cut"):
        lines.append("Cut: " + ", ".join(f"{k} {v}" for k, v in sorted(cut.items())) + ".")
    if given_up:
        lines.append(f"Given up: {given_up} page(s), see `crawlsched run status`.")
    return f"crawlsched: {schedule_id} {end.result}", "\n".join(lines)


def plan_notices(
    rt: Runtime, run: dict[str, Any], end: RunEnd, notify: dict[str, Any], given_up: int
) -> list[str]:
    """Create one delivery per notice target of the schedule; their ids."""
    title, body = notice_text(run, end, given_up)
    store, ids = rt.deliveries, []
    for position, target in enumerate(notify.get("notices") or [], start=1):
        if not isinstance(target, dict) or not isinstance(target.get("secret"), str):
            continue
        delivery_id = f"{run['_id']}:{end.event}:{NOTICE}:{position}"
        doc = {
            "kind": NOTICE,
            "secret": target["secret"],
            "shown": str(target.get("shown", "?")),
            "event": end.event,
            "result": end.result,
            "run_id": run["_id"],
            "title": title,
            "body": body,
        }
        store.create(delivery_id, doc, rt.now())
        ids.append(delivery_id)
    return ids


def send_notice(rt: Runtime, delivery: dict[str, Any]) -> str | None:
    """Send one notice through Apprise: None when the service took it, else why not (with
    nothing of the URL the redacted form does not show). Every socket Apprise opens on the
    way goes only where the network rule allows, however the URL spells its server
    (`outbound.socket_guard`): the check that holds when it is sent, whatever was checked
    when it was set."""
    url = rt.secrets.decrypt(delivery["secret"])
    shown = delivery.get("shown", "?")
    try:
        parse_notice_url(url)
    except ValueError as e:
        return scrub(str(e), url, shown)
    import apprise  # imported where it is used: every command line would pay for it otherwise

    sender = apprise.Apprise()
    sender.add(url)
    said: list[str] = []
    with only_allowed(rt.allowed_networks) as guard:
        sent = sender.notify(
            body=delivery["body"],
            title=delivery["title"],
            notify_type=apprise.NotifyType(_TYPES.get(delivery.get("result", ""), "warning")),
            timeout=NOTICE_TIMEOUT_S,
            log_callback=lambda entry, _plugin: said.append(f"{entry.level}: {entry.message}"),
        )
    if guard.refused:
        return scrub(f"refused: {guard.refused[0]}", url, shown)
    if sent:
        return None
    problems = [line for line in said if not line.startswith(("DEBUG", "INFO"))] or said
    return scrub(" | ".join(problems[-2:]) or "not sent", url, shown)

"""Webhook notifications of a run's end, as a schedule asks (`notify: {webhook, on}`), and
the same outbox for notices to Apprise targets (`notify.notices`, see `flow.notices`).

A schedule document may carry `notify: {"webhook": "https://…", "on": ["finished", "failed"]}`.
When a top-level run of it ends with one of those results, a delivery record is created and
the `deliver_webhook` actor POSTs the event. Failures raise, and dramatiq's Retries send the
message again with exponential backoff. The record is the outbox: a delivery still pending
when its next try is due (its message died with a killed process, or its retries ran out
while the receiver was down) is sent again by the relay (`relay_webhooks`, every tick), with
backoff, until the receiver answers 2xx. A copy of the message that arrives after a success
finds the record delivered and sends nothing; the `Idempotency-Key` header (and the body's
`event_id`) lets a receiver drop the one duplicate no sender can rule out (a crash after the
POST succeeded and before it was recorded).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx

from crawlsched.errors import WebhookFailed
from crawlsched.flow.notices import NOTICE, NOTICE_HOLD_S, plan_notices, send_notice
from crawlsched.logs import get_logger
from crawlsched.planning.run_end import RunEnd
from crawlsched.runtime import Runtime
from crawlsched.schedules.notice_urls import scrub, url_shown
from crawlsched.schedules.spec import DEFAULT_NOTIFY_ON
from crawlsched.store.deliveries import MongoDeliveryStore

log = get_logger(__name__)


def notify_of(schedule: dict[str, Any] | None, result_word: str) -> dict[str, Any] | None:
    """The schedule's `notify` field when it asks to hear of a run that ended `result_word`."""
    notify = (schedule or {}).get("notify")
    if not isinstance(notify, dict):
        return None
    on = notify.get("on", list(DEFAULT_NOTIFY_ON))
    if result_word == "incomplete" and isinstance(on, list) and "failed" in on:
        on = [*on, "incomplete"]  # asked before runs could end incomplete: the worse end too
    if not isinstance(on, list) or result_word not in on:
        return None
    return notify


def webhook_of(schedule: dict[str, Any] | None, result_word: str) -> dict[str, Any] | None:
    """The webhook to notify of a run that ended `result_word`, sealed (`secret`, `shown`),
    or None (unset, or malformed). A webhook stored in the clear by an earlier version is
    sealed here, so no delivery record holds it in the clear."""
    webhook = (notify_of(schedule, result_word) or {}).get("webhook")
    if isinstance(webhook, dict) and isinstance(webhook.get("secret"), str):
        return {"secret": webhook["secret"], "shown": str(webhook.get("shown", "?"))}
    if not isinstance(webhook, str):
        return None
    try:
        scheme = httpx.URL(webhook).scheme
    except httpx.InvalidURL:
        scheme = ""
    if scheme not in ("http", "https"):
        log.warning("webhook_ignored_bad_url", schedule_id=(schedule or {}).get("_id"))
        return None
    return {"plain": webhook, "shown": url_shown(webhook)}


def plan_webhook(
    rt: Runtime,
    run: dict[str, Any],
    end: RunEnd,
    event_id: str | None = None,
    given_up: list[dict[str, Any]] | None = None,
) -> str | None:
    """Create the delivery of this run's end if its schedule asks for one; its id, or None.

    Child runs of a multi-process run do not notify: their parent's end does, once.
    """
    if run.get("parent_id"):
        return None
    word = end.event.removeprefix("Run").lower()
    webhook = webhook_of(rt.schedules.get(run.get("schedule_id") or ""), word)
    if webhook is None:
        return None
    secret = webhook.get("secret") or rt.secrets.encrypt(webhook["plain"])
    delivery_id = event_id or f"{run['_id']}:{end.event}"
    body = {
        "event": end.event,
        "event_id": event_id or delivery_id,
        "run_id": run["_id"],
        "schedule_id": run.get("schedule_id"),
        "result": end.result,
        "planned": run.get("planned", 0),
        "counts": run.get("counts", {}),
        "cut": run.get("cut", {}),
        "given_up": given_up or [],
    }
    doc = {"secret": secret, "shown": webhook["shown"], "event": end.event, "run_id": run["_id"]}
    rt.deliveries.create(delivery_id, {**doc, "body": body}, rt.now())
    return delivery_id


def plan_deliveries(
    rt: Runtime,
    run: dict[str, Any],
    end: RunEnd,
    event_id: str | None = None,
    given_up: list[dict[str, Any]] | None = None,
) -> list[str]:
    """Every delivery of this run's end its schedule asks for: the webhook's, then one per
    notice target. Child runs do not notify (their parent's end does, once)."""
    delivery_id = plan_webhook(rt, run, end, event_id, given_up)
    ids = [] if delivery_id is None else [delivery_id]
    if run.get("parent_id"):
        return ids
    schedule = rt.schedules.get(run.get("schedule_id") or "")
    notify = notify_of(schedule, end.event.removeprefix("Run").lower())
    if notify is not None:
        ids += plan_notices(rt, run, end, notify, len(given_up or []))
    return ids


def relay_webhooks(rt: Runtime, notify: Callable[[str], None]) -> int:
    """Send again every delivery still pending whose next try is due: its message was lost
    (a process killed) or its retries ran out while the receiver was down."""
    due = rt.deliveries.due(rt.now())
    for delivery_id in due:
        notify(delivery_id)
    if due:
        log.info("webhooks_relayed", deliveries=len(due))
    return len(due)


def deliver(rt: Runtime, delivery_id: str, client: httpx.Client) -> str:
    """POST one delivery. Returns what happened; raises WebhookFailed to be retried."""
    store = rt.deliveries
    timeout_s = rt.settings.webhook_timeout_s
    # A notice may take an SMTP handshake or two: it is held for as long as Apprise may take.
    is_notice = f":{NOTICE}:" in delivery_id
    taken = store.take(delivery_id, rt.now(), hold_s=NOTICE_HOLD_S if is_notice else timeout_s + 5)
    if taken is None:
        existing = store.get(delivery_id)
        if existing is None:
            log.warning("webhook_unknown_delivery", delivery_id=delivery_id)
            return "unknown"
        if existing["state"] == "delivered":
            return "already_delivered"
        raise WebhookFailed(delivery_id, "another worker is sending it")
    if taken.get("kind") == NOTICE:
        return _deliver_notice(rt, store, taken)
    # Sealed as the schedule holds it; a record of an earlier version may hold it in the clear.
    url = rt.secrets.decrypt(taken["secret"]) if "secret" in taken else taken["url"]
    shown = str(taken.get("shown") or url_shown(url))
    try:
        # The checked client: every address of the host is checked as the connection is made.
        response = client.post(
            url,
            json=taken["body"],
            headers={"Idempotency-Key": delivery_id},
            timeout=timeout_s,
        )
    except (httpx.HTTPError, httpx.InvalidURL) as e:
        error = scrub(f"{type(e).__name__}: {e}", url, shown)
        store.attempt_failed(delivery_id, error, rt.now())
        raise WebhookFailed(delivery_id, type(e).__name__) from None
    if not response.is_success:
        store.attempt_failed(delivery_id, f"HTTP {response.status_code}", rt.now())
        raise WebhookFailed(delivery_id, f"HTTP {response.status_code}")
    store.delivered(delivery_id, response.status_code, rt.now())
    log.info("webhook_delivered", delivery_id=delivery_id, attempts=taken["attempts"])
    return "delivered"


def _deliver_notice(rt: Runtime, store: MongoDeliveryStore, taken: dict[str, Any]) -> str:
    delivery_id = taken["_id"]
    error = send_notice(rt, taken)
    if error is not None:
        store.attempt_failed(delivery_id, error, rt.now())
        log.warning("notice_failed", delivery_id=delivery_id, target=taken.get("shown"))
        raise WebhookFailed(delivery_id, f"notice to {taken.get('shown')} not sent")
    store.delivered(delivery_id, 0, rt.now())
    log.info("notice_delivered", delivery_id=delivery_id, attempts=taken["attempts"])
    return "delivered"

"""Middleware at the message boundary: refuse what cannot be trusted before any actor runs.

A message is untrusted input. `GuardMessages` (first in the chain, before AgeLimit) dead-letters
one that is too big, whose timestamp is not an integer (AgeLimit would raise on it and the
message would run anyway), or whose signature does not match when a signing key is set.
`LogDeadLetters` logs, at WARNING and with the reason, every message an actor refused with one
of its `throws=` exceptions: dramatiq alone logs those at INFO, without the reason. And every
other message rejected (dead-lettered) as it is rejected: its retries exhausted, its age limit
passed, its actor unknown. dramatiq's own lines for those name no actor, or no message id.
Each reason is kept in the message's options (`dead_letter_reason`) too, where the broker keeps
the rejected message itself (the StubBroker's `dead_letters`; RabbitMQ dead-letters the message
as it was delivered, with an `x-death` header).
"""

from __future__ import annotations

import hashlib
import hmac
import inspect
import json

from dramatiq import Middleware
from dramatiq.middleware import SkipMessage

from crawlsched.logs import get_logger
from crawlsched.services import error_reason

log = get_logger("crawlsched.guards")

# Far above the largest genuine message (a batch of MAX_BATCH_JOBS ids is about 300 KB).
MAX_MESSAGE_BYTES = 1_000_000
SIGNATURE_OPTION = "crawlsched_signature"
REASON_OPTION = "dead_letter_reason"


def signature(key: bytes, message) -> str:
    """HMAC-SHA256 over what a message asks for; options are left out (retries rewrite them)."""
    body = json.dumps(
        [message.message_id, message.actor_name, message.args, message.kwargs],
        sort_keys=True,
        separators=(",", ":"),
        default=str,
    )
    return hmac.new(key, body.encode(), hashlib.sha256).hexdigest()


def message_names(message) -> dict[str, str]:
    """What names a message in a log line, each cut short (a message is untrusted)."""
    return {
        "actor": str(message.actor_name)[:100],
        "queue": str(message.queue_name)[:100],
        "message_id": str(message.message_id)[:100],
    }


def dead_letter(message, reason: str) -> None:
    log.warning("message_dead_lettered", **message_names(message), reason=reason[:500])
    message.options[REASON_OPTION] = reason[:500]
    message.named_dead = True  # on this delivery (the proxy): not named again when rejected
    message.fail()


class GuardMessages(Middleware):
    def __init__(self, signing_key: bytes | None = None) -> None:
        self.signing_key = signing_key

    def before_enqueue(self, broker, message, delay) -> None:
        if self.signing_key is not None:
            message.options[SIGNATURE_OPTION] = signature(self.signing_key, message)

    def before_process_message(self, broker, message) -> None:
        reason = self._problem(message) or _arguments_problem(broker, message)
        if reason is not None:
            dead_letter(message, reason)
            raise SkipMessage(reason)

    def _problem(self, message) -> str | None:
        timestamp = message.message_timestamp
        if isinstance(timestamp, bool) or not isinstance(timestamp, int):
            return f"message_timestamp is not an integer: {str(timestamp)[:50]!r}"
        size = len(message.encode())
        if size > MAX_MESSAGE_BYTES:
            return f"message of {size} bytes exceeds {MAX_MESSAGE_BYTES}"
        if self.signing_key is not None:
            given = message.options.get(SIGNATURE_OPTION)
            if not isinstance(given, str) or not hmac.compare_digest(
                given, signature(self.signing_key, message)
            ):
                return "missing or bad signature"
        return None


def _arguments_problem(broker, message) -> str | None:
    """Arguments the actor cannot even be called with: retrying would fail the same way."""
    try:
        actor = broker.get_actor(message.actor_name)
    except Exception:  # ActorNotFound: dramatiq's worker dead-letters it itself
        return None
    try:
        inspect.signature(actor.fn).bind(*message.args, **message.kwargs)
    except TypeError as e:
        return f"arguments do not fit {actor.actor_name}: {e}"
    return None


class LogDeadLetters(Middleware):
    def after_process_message(self, broker, message, *, result=None, exception=None) -> None:
        if exception is None:
            return
        actor = broker.get_actor(message.actor_name)
        throws = message.options.get("throws") or actor.options.get("throws")
        if throws and isinstance(exception, throws):
            dead_letter(message, f"{type(exception).__name__}: {exception}")

    def before_nack(self, broker, message) -> None:
        """Any other rejection, named as it happens (one already named is not named again)."""
        if getattr(message, "named_dead", False):
            return
        error = getattr(message, "_exception", None)  # what the worker stuffed into it
        reason = error_reason(error)[:500] if error is not None else "failed by a middleware"
        message.options[REASON_OPTION] = reason
        retries = message.options.get("retries")
        log.warning(
            "message_dead_lettered", **message_names(message), reason=reason, retries=retries
        )


class WarnUnsigned(Middleware):
    """One WARNING when a worker starts on a shared broker without a signing key: what that
    lets through is anything anyone with publish rights on the vhost sends."""

    def after_worker_boot(self, broker, worker) -> None:
        log.warning(
            "messages_unsigned",
            reason="CRAWLSCHED_MESSAGE_SIGNING_KEY is unset: anyone who can publish on this "
            "RabbitMQ vhost can send this worker ticks, plans and crawl batches, and it runs "
            "them; set the same key (32+ characters) on every process",
        )

"""Bind log context for the length of one message: every log line then carries it."""

from __future__ import annotations

import inspect
from functools import cache
from typing import Any

import structlog
from dramatiq import Middleware

# Message arguments worth seeing on every line an actor logs (never secrets: none travel).
_CONTEXT_KEYS = ("run_id", "dispatch_id", "schedule_id", "report_key", "task", "collection")


@cache
def _parameter_names(fn: Any) -> tuple[str, ...]:
    try:
        return tuple(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return ()


def message_context(names: tuple[str, ...], args: tuple, kwargs: dict) -> dict[str, Any]:
    """The context keys found in a message: as named arguments (`plan_crawls(schedule_id, …)`)
    or inside a payload dict (a batch, a report). Only short strings: a message is untrusted."""
    sources = [dict(zip(names, args, strict=False)), kwargs]
    sources += [a for a in (*args, *kwargs.values()) if isinstance(a, dict)]
    context: dict[str, Any] = {}
    for source in sources:
        for key in _CONTEXT_KEYS:
            value = source.get(key)
            if isinstance(value, str) and len(value) <= 200 and key not in context:
                context[key] = value
    # A run id is `<schedule_id>@<fire time>`: lines of a run name its schedule too.
    if "run_id" in context and "schedule_id" not in context and "@" in context["run_id"]:
        context["schedule_id"] = context["run_id"].rpartition("@")[0]
    return context


class LogContext(Middleware):
    def before_process_message(self, broker, message) -> None:
        structlog.contextvars.clear_contextvars()
        try:
            names = _parameter_names(broker.get_actor(message.actor_name).fn)
        except Exception:  # an unknown actor: dramatiq rejects the message itself
            names = ()
        structlog.contextvars.bind_contextvars(
            message_id=message.message_id,
            actor=message.actor_name,
            **message_context(names, tuple(message.args), dict(message.kwargs)),
        )

    def after_process_message(self, broker, message, *, result=None, exception=None) -> None:
        structlog.contextvars.clear_contextvars()

    after_skip_message = after_process_message

"""Bind log context for the length of one message: every log line then carries it."""

from __future__ import annotations

import structlog
from dramatiq import Middleware

# Message arguments worth seeing on every line an actor logs (never secrets: none travel).
_CONTEXT_KEYS = ("run_id", "dispatch_id", "schedule_id", "report_key", "task", "collection")


class LogContext(Middleware):
    def before_process_message(self, broker, message) -> None:
        structlog.contextvars.clear_contextvars()
        context = {"message_id": message.message_id, "actor": message.actor_name}
        for source in (message.kwargs, *(a for a in message.args if isinstance(a, dict))):
            if isinstance(source, dict):
                context.update({k: source[k] for k in _CONTEXT_KEYS if k in source})
        structlog.contextvars.bind_contextvars(**context)

    def after_process_message(self, broker, message, *, result=None, exception=None) -> None:
        structlog.contextvars.clear_contextvars()

    after_skip_message = after_process_message

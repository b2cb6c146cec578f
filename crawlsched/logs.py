"""structlog set-up: JSON lines in production, readable lines on a terminal.

Context (run_id, job_id, dispatch_id, message_id, actor) is bound through contextvars by the
broker middleware, so every line an actor logs carries it without passing it around.
"""

from __future__ import annotations

import logging
import re
import sys

import structlog

_USERINFO = re.compile(r"([a-zA-Z][a-zA-Z0-9+.-]*://)[^/@\s]+@")


# No value longer than this reaches a log line; longer ones are cut with a marker saying so.
MAX_VALUE_CHARS = 2_000
MAX_EVENT_KEYS = 40


def _cut(value: str) -> str:
    if len(value) <= MAX_VALUE_CHARS:
        return value
    return f"{value[:MAX_VALUE_CHARS]}…[truncated {len(value) - MAX_VALUE_CHARS} chars]"


def bound_values(_logger, _method: str, event: dict) -> dict:
    """A structlog processor: every value rendered within MAX_VALUE_CHARS, at most
    MAX_EVENT_KEYS keys, so no message or exception can make a line big enough to break logging.
    Also scrubs URL userinfo from strings (user:password@ never reaches a log)."""
    bounded: dict = {}
    for index, (key, value) in enumerate(event.items()):
        if index >= MAX_EVENT_KEYS:
            bounded["truncated_keys"] = len(event) - MAX_EVENT_KEYS
            break
        if isinstance(value, bool | int | float | type(None)):
            bounded[key] = value
        else:
            bounded[key] = scrub_userinfo(_cut(value if isinstance(value, str) else repr(value)))
    return bounded


def scrub_userinfo(text: str) -> str:
    """`scheme://user:pass@host` → `scheme://***@host` wherever it appears in the text."""
    return _USERINFO.sub(r"\1***@", text) if "@" in text else text


def configure_logging(log_format: str = "auto", level: str = "INFO") -> None:
    use_json = log_format == "json" or (log_format == "auto" and not sys.stderr.isatty())
    renderer = (
        structlog.processors.JSONRenderer()
        if use_json
        else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    )
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        raise ValueError(f"log_level: unknown level {level!r}")
    shared = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    structlog.configure(
        processors=[
            *shared,
            structlog.processors.StackInfoRenderer(),
            structlog.processors.format_exc_info,
            bound_values,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
    # dramatiq and pika log through the standard library: route them through the same renderer.
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.processors.format_exc_info,
                bound_values,
                renderer,
            ],
            foreign_pre_chain=[*shared, structlog.stdlib.add_logger_name],
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(numeric)
    logging.getLogger("pika").setLevel(max(numeric, logging.WARNING))
    # httpx logs every request's full URL at INFO: the driver logs what matters, scrubbed.
    for noisy in ("httpx", "httpcore"):
        logging.getLogger(noisy).setLevel(max(numeric, logging.WARNING))


def get_logger(name: str) -> structlog.stdlib.BoundLogger:
    return structlog.get_logger(name)

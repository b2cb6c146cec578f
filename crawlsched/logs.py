"""structlog set-up: JSON lines in production, readable lines on a terminal.

Context (run_id, job_id, dispatch_id, message_id, actor) is bound through contextvars by the
broker middleware, so every line an actor logs carries it without passing it around.
"""

from __future__ import annotations

import logging
import re
import sys
import time

import structlog

_USERINFO = re.compile(r"([a-zA-Z][a-zA-Z0-9+.-]*://)[^/@\s]+@")


# No value longer than this reaches a log line; longer ones are cut with a marker saying so.
MAX_VALUE_CHARS = 2_000
MAX_EVENT_KEYS = 40
# A traceback keeps its first and last lines (the error itself is the last), each line cut here.
TRACEBACK_KEYS = frozenset({"exception", "stack"})
TRACEBACK_HEAD_LINES = 6
TRACEBACK_TAIL_LINES = 14
TRACEBACK_LINE_CHARS = 300


def _cut(value: str) -> str:
    if len(value) <= MAX_VALUE_CHARS:
        return value
    return f"{value[:MAX_VALUE_CHARS]}…[truncated {len(value) - MAX_VALUE_CHARS} chars]"


def _cut_line(line: str) -> str:
    if len(line) <= TRACEBACK_LINE_CHARS:
        return line
    return f"{line[:TRACEBACK_LINE_CHARS]}…[truncated {len(line) - TRACEBACK_LINE_CHARS} chars]"


def cut_traceback(text: str) -> str:
    """A long traceback within MAX_VALUE_CHARS that keeps its head and its tail: the first
    lines, "… K lines …", then the last lines, so the `SomeError: message` line always
    survives (cut itself if it is longer than TRACEBACK_LINE_CHARS)."""
    if len(text) <= MAX_VALUE_CHARS:
        return text
    lines = [_cut_line(line) for line in text.splitlines()]
    # The tail first, from the last line back (the last always kept): two thirds of the room.
    tail: list[str] = []
    room = MAX_VALUE_CHARS * 2 // 3
    for line in reversed(lines):
        if tail and (len(tail) >= TRACEBACK_TAIL_LINES or len(line) + 1 > room):
            break
        tail.insert(0, line)
        room -= len(line) + 1
    head: list[str] = []
    room += MAX_VALUE_CHARS // 3 - 40  # what the tail left, and room for the marker
    for line in lines[: len(lines) - len(tail)]:
        if len(head) >= TRACEBACK_HEAD_LINES or len(line) + 1 > room:
            break
        head.append(line)
        room -= len(line) + 1
    skipped = len(lines) - len(head) - len(tail)
    middle = [f"… {skipped} lines …"] if skipped else []
    return "\n".join([*head, *middle, *tail])


def bound_values(_logger, _method: str, event: dict) -> dict:
    """A structlog processor: every value rendered within MAX_VALUE_CHARS, at most
    MAX_EVENT_KEYS keys, so no message or exception can make a line big enough to break logging.
    A traceback (`exception`, `stack`) keeps its head and its tail (`cut_traceback`).
    Also scrubs URL userinfo from strings (user:password@ never reaches a log)."""
    bounded: dict = {}
    for index, (key, value) in enumerate(event.items()):
        if index >= MAX_EVENT_KEYS:
            bounded["truncated_keys"] = len(event) - MAX_EVENT_KEYS
            break
        if isinstance(value, bool | int | float | type(None)):
            bounded[key] = value
        elif key in TRACEBACK_KEYS and isinstance(value, str):
            bounded[key] = scrub_userinfo(cut_traceback(value))
        else:
            bounded[key] = scrub_userinfo(_cut(value if isinstance(value, str) else repr(value)))
    return bounded


def scrub_userinfo(text: str) -> str:
    """`scheme://user:pass@host` → `scheme://***@host` wherever it appears in the text."""
    return _USERINFO.sub(r"\1***@", text) if "@" in text else text


class OutageFilter(logging.Filter):
    """While the broker is away, every consumer thread logs each failed reconnect (dramatiq
    retries every few seconds per queue: hundreds of lines a minute). Let one such line through
    per backoff step (1 s, 2 s, 4 s … capped at 60 s), saying how many were held back."""

    MARKERS = ("connection error", "Restarting consumer")
    MAX_STEP_S = 60.0

    def __init__(self) -> None:
        super().__init__()
        self.step_s = 0.0
        self.next_at = 0.0
        self.held = 0

    def filter(self, record: logging.LogRecord) -> bool:
        message = str(record.msg)
        if not any(marker in message for marker in self.MARKERS) and not _lost_connection(record):
            return True
        now = time.monotonic()
        if now - self.next_at > 2 * self.MAX_STEP_S:
            self.step_s = 0.0  # a new outage: start again from the first step
        if now < self.next_at:
            self.held += 1
            return False
        self.step_s = min(max(self.step_s * 2, 1.0), self.MAX_STEP_S)
        self.next_at = now + self.step_s
        record.msg = f"broker connection lost; consumers keep reconnecting: {message}"
        record.msg += f" ({self.held} similar lines held back; next report in {self.step_s:.0f}s)"
        self.held = 0
        return True


def _lost_connection(record: logging.LogRecord) -> bool:
    """Whether the record's exception is, or was raised while handling, a lost broker
    connection. With publisher confirms a consumer thread can lose it while opening its channel
    (`confirm_delivery`), and dramatiq logs that as an "unexpected error", once per queue."""
    from dramatiq import errors
    from pika.exceptions import AMQPConnectionError

    # dramatiq 2 renamed its ConnectionError (the old name warns); 1.x has only the old one.
    broker_error = getattr(errors, "BrokerConnectionError", None) or errors.ConnectionError
    error = record.exc_info[1] if record.exc_info else None
    for _ in range(8):  # a short chain of causes: never loop on a cycle
        if error is None:
            return False
        if isinstance(error, AMQPConnectionError | broker_error):
            return True
        error = error.__cause__ or error.__context__
    return False


class _CurrentStderr:
    """`sys.stderr` as it is when a line is written, not when logging was set up: a command
    run inside another process (a test's runner) swaps it for a while and closes its own."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


_STDERR = _CurrentStderr()


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
        # One write per line: in a `dramatiq` group every write to stderr is a message of its
        # own on the pipe to the parent, and `print` writes the line and its newline apart, so
        # another process's line could land between them (two JSON objects on one line).
        logger_factory=structlog.WriteLoggerFactory(file=_STDERR),
        cache_logger_on_first_use=False,
    )
    # dramatiq and pika log through the standard library: route them through the same renderer.
    handler = logging.StreamHandler(_STDERR)
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
    # On the handler, not a logger: dramatiq names a logger per consumer thread and queue.
    handler.addFilter(OutageFilter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(numeric)
    # pika logs each failed connection in five ERROR lines: the outage is reported once per
    # backoff step instead (OutageFilter) and a command's failure in one line (services.py).
    logging.getLogger("pika").setLevel(numeric if numeric <= logging.DEBUG else logging.CRITICAL)

    # httpx logs every request's full URL at INFO, urllib3 (under Apprise and Selenium) at
    # DEBUG, query string and all: the driver logs what matters, scrubbed.
    for noisy in ("httpx", "httpcore", "urllib3"):
        logging.getLogger(noisy).setLevel(max(numeric, logging.WARNING))
    # Apprise logs a notice's URL, headers and all (`+Authorization=…`), and lowers its own
    # level while it sends: none of it reaches our logs. What it says about a send reaches the
    # sender through its log callback, scrubbed of the URL's secrets (`flow/notices.py`).
    apprise_logger = logging.getLogger("apprise")
    apprise_logger.propagate = False
    if not any(isinstance(h, logging.NullHandler) for h in apprise_logger.handlers):
        apprise_logger.addHandler(logging.NullHandler())  # not the last-resort stderr either


def get_logger(name: str) -> structlog.stdlib.BoundLogger:
    return structlog.get_logger(name)

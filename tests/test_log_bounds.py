"""No value can make a log line big enough to break logging, and no URL password reaches one."""

from __future__ import annotations

import json
import logging
import re
import sys

import structlog

from crawlsched.logs import (
    MAX_VALUE_CHARS,
    OutageFilter,
    configure_logging,
    cut_traceback,
    get_logger,
)


def _lines(capsys) -> list[dict]:
    return [json.loads(line) for line in capsys.readouterr().err.splitlines()]


def test_a_1_3_mb_value_is_cut_with_a_marker_and_logging_goes_on(capsys, monkeypatch):
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", list(root.handlers))  # restored after the test
    monkeypatch.setattr(root, "level", root.level)
    configure_logging("json", "INFO")
    log = get_logger("test")
    ids = [f"oid:{i:024x}" for i in range(45_000)]  # about 1.3 MB once rendered

    log.warning("huge_message", job_ids=ids)
    try:
        raise ValueError("x" * 1_300_000)
    except ValueError:
        log.exception("huge_exception")
    logging.getLogger("dramatiq.worker").warning("Received %s", "y" * 1_300_000)
    log.info("still_logging", url="amqp://guest:hunter2@rabbit:5672/%2f")

    lines = _lines(capsys)
    assert [e["event"][:16] for e in lines] == [
        "huge_message",
        "huge_exception",
        "Received " + "y" * 7,
        "still_logging",
    ]
    assert all(len(json.dumps(e)) < 3 * MAX_VALUE_CHARS for e in lines)
    assert lines[0]["job_ids"].endswith("chars]") and "truncated" in lines[0]["job_ids"]
    assert lines[3]["url"] == "amqp://***@rabbit:5672/%2f"
    structlog.reset_defaults()


def test_outage_filter_lets_one_line_through_per_backoff_step(monkeypatch):
    clock = [0.0]
    monkeypatch.setattr("crawlsched.logs.time.monotonic", lambda: clock[0])
    outage = OutageFilter()

    def record(msg: str) -> logging.LogRecord:
        return logging.LogRecord("dramatiq.worker.ConsumerThread", 50, "", 0, msg, (), None)

    passed = []
    # 30 consumer threads each failing every 3 s for 10 minutes
    for tick in range(200):
        clock[0] = tick * 3.0
        for _ in range(30):
            passed.append(outage.filter(record("Consumer encountered a connection error: x")))
    assert outage.filter(record("an unrelated line")) is True
    per_minute = sum(passed) / 10
    assert sum(passed) >= 10  # the outage is still visible
    assert per_minute <= 2, per_minute


def test_outage_filter_holds_back_unexpected_errors_raised_by_a_lost_connection(monkeypatch):
    # A consumer thread that loses the connection while opening its channel: dramatiq logs
    # "Consumer encountered an unexpected error." with an error raised while handling the loss
    import pika.exceptions

    clock = [0.0]
    monkeypatch.setattr("crawlsched.logs.time.monotonic", lambda: clock[0])
    outage = OutageFilter()

    def unexpected(error: BaseException) -> logging.LogRecord:
        return logging.LogRecord(
            "dramatiq.worker.ConsumerThread", 50, "", 0,
            "Consumer encountered an unexpected error.", (),
            (type(error), error, error.__traceback__),
        )  # fmt: skip

    def raised_while_handling_a_lost_stream() -> BaseException:
        try:
            try:
                raise pika.exceptions.StreamLostError("Transport indicated EOF")
            except pika.exceptions.StreamLostError:
                raise AttributeError("connection")  # noqa: B904  (its context is the loss)
        except AttributeError as error:
            return error

    # One such line per queue (24 queues) at the same moment: one gets through
    passed = [outage.filter(unexpected(raised_while_handling_a_lost_stream())) for _ in range(24)]
    assert sum(passed) == 1
    # An unexpected error that has nothing to do with the connection is never held back
    assert outage.filter(unexpected(ValueError("a bug"))) is True


def _ping(depth: int) -> None:
    if depth == 0:
        raise KeyError("the error at the bottom")
    _pong(depth - 1)


def _pong(depth: int) -> None:
    _ping(depth)  # a different line from _ping's each time: no "[Previous line repeated]"


def test_a_deep_traceback_keeps_its_head_and_its_last_line(capsys, monkeypatch):
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", list(root.handlers))  # restored after the test
    monkeypatch.setattr(root, "level", root.level)
    configure_logging("json", "INFO")
    log = get_logger("test")

    # Given an exception raised 400 frames down (about 1,600 traceback lines)
    for emit in (log.exception, logging.getLogger("dramatiq.worker").exception):
        try:
            _ping(400)
        except KeyError:
            emit("deep_failure")

    # Then each line keeps the traceback's first lines, a marker, and its end, within bounds
    for line in _lines(capsys):
        lines = line["exception"].splitlines()
        assert lines[-1] == "KeyError: 'the error at the bottom'"
        assert "raise KeyError" in lines[-2]
        assert lines[0] == "Traceback (most recent call last):"
        assert any(re.fullmatch(r"… \d+ lines …", one) for one in lines)
        assert len(line["exception"]) <= MAX_VALUE_CHARS
    structlog.reset_defaults()


def test_a_traceback_whose_error_line_is_huge_keeps_its_start():
    text = "Traceback (most recent call last):\n" + '  File "x.py", line 1\n' * 500
    text += "ValueError: " + "v" * 100_000
    cut = cut_traceback(text)
    assert len(cut) <= MAX_VALUE_CHARS
    assert cut.splitlines()[-1].startswith("ValueError: vvv")
    assert cut.splitlines()[-1].endswith("chars]")
    assert cut_traceback("short\ntrace") == "short\ntrace"


def test_each_line_is_one_write_so_a_dramatiq_group_never_splices_two(monkeypatch):
    # In a `dramatiq` group a worker's stderr is dramatiq's StreamablePipe: each write is one
    # message to the parent, which copies them out in the order they come from every process.
    # A line written in two parts can get another process's line between them.
    import multiprocessing

    from dramatiq.compat import StreamablePipe

    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", list(root.handlers))  # restored after the test
    monkeypatch.setattr(root, "level", root.level)
    saved = structlog.get_config()
    read_end, write_end = multiprocessing.Pipe(duplex=False)
    monkeypatch.setattr(sys, "stderr", StreamablePipe(write_end))
    try:
        configure_logging("json", "INFO")
        get_logger("test").info("schedule_fired", schedule_id="s-1")
        logging.getLogger("dramatiq").warning("through the standard library")
        messages = []
        while read_end.poll(0):
            messages.append(read_end.recv_bytes().decode())
    finally:
        structlog.configure(**saved)  # not left writing to a closed pipe
        read_end.close()
        write_end.close()
    assert len(messages) == 2, messages
    assert all(m.endswith("\n") and m.count("\n") == 1 for m in messages), messages
    assert [json.loads(m)["event"] for m in messages] == [
        "schedule_fired",
        "through the standard library",
    ]

"""Every command, the clock and a `dramatiq` worker pointed at a closed port: one clear line
naming the service, the URL without its password and what to check; exit 1, in bounded time,
with a bounded number of log lines. Real subprocesses, real pika and pymongo."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.workers import crawlsched_env

BIN = Path(sys.executable).parent
PASSWORD = "hunter2-do-not-print"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens once it is closed


COMMANDS = [
    ["init-db"],
    ["sweep-now", "sweep-profiles"],
    ["runs"],
    ["pools"],
    ["run", "status", "x@20240101T000000Z"],
    ["run", "resources", "x@20240101T000000Z"],
    ["accounts", "add", "twitter", "alice", "--secret-env", "HOME"],
    ["accounts", "list"],
    ["accounts", "ban", "twitter", "alice"],
    ["accounts", "disable", "twitter", "alice"],
    ["accounts", "enable", "twitter", "alice"],
    ["nodes", "add", "http://127.0.0.1:4444"],
    ["nodes", "list"],
    ["nodes", "drain", "http://127.0.0.1:4444"],
    ["nodes", "remove", "http://127.0.0.1:4444"],
    ["jobs", "problems"],
    ["jobs", "retry-problems"],
    ["jobs", "summary"],
    ["jobs", "add", "profile", "twitter", "alice"],
    ["jobs", "add", "website", "https://example.org/"],
]


def _run(args: list[str], env: dict[str, str], timeout: float = 60) -> tuple[int, str, float]:
    started = time.monotonic()
    done = subprocess.run(
        args,
        env=env,
        input="s3cret\n",
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    return done.returncode, done.stderr + done.stdout, time.monotonic() - started


def _env(mongo_url: str, broker_url: str) -> dict[str, str]:
    env = crawlsched_env(broker_url, mongo_url, "dead_services")
    env["CRAWLSCHED_CONNECT_TIMEOUT_S"] = "1"
    return env


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c[:2]))
def test_command_with_mongodb_gone_says_so_in_one_line(command, tmp_path):
    jobs_file = tmp_path / "jobs.jsonl"
    jobs_file.write_text('{"kind": "website", "target": "https://example.org/"}\n')
    url = f"mongodb://admin:{PASSWORD}@127.0.0.1:{_closed_port()}/"
    args = [str(BIN / "crawlsched"), *(a.format(jobs_file=jobs_file) for a in command)]

    code, output, elapsed = _run(args, _env(url, "stub://"))

    lines = output.strip().splitlines()
    assert len(lines) == 1, output
    if command[:2] == ["nodes", "add"]:  # it probes the node first, and says so
        # (No node answers at that URL: a URL to fix, exit 2, as the API's 404.)
        assert code == 2, output
        assert lines[0].startswith("error: Selenium node http://127.0.0.1:4444 unreachable")
        return
    assert code == 1, output
    assert lines[0].startswith("error: MongoDB unreachable at mongodb://***@127.0.0.1:"), output
    assert "CRAWLSCHED_MONGO_URL" in lines[0] and PASSWORD not in output
    assert elapsed < 30


def test_clock_with_broker_gone_says_so_in_one_line():
    url = f"amqp://guest:{PASSWORD}@127.0.0.1:{_closed_port()}/%2f"
    env = _env("mongomock://", url)

    code, output, elapsed = _run([str(BIN / "crawlsched"), "clock", "--count", "1"], env)

    assert code == 1, output
    assert output.strip().splitlines() == [
        f"error: RabbitMQ unreachable at amqp://***@127.0.0.1:{url.split(':')[3]} "
        "(AMQPConnectionError): is RabbitMQ running, and do the user, password and vhost of "
        "CRAWLSCHED_BROKER_URL exist?"
    ]
    assert elapsed < 30


@pytest.mark.parametrize("service", ["broker", "mongodb", "vhost"])
def test_dramatiq_worker_with_a_service_gone_exits_with_one_line(service, rabbitmq_url):
    mongo = f"mongodb://admin:{PASSWORD}@127.0.0.1:{_closed_port()}/"
    broker = f"amqp://guest:{PASSWORD}@127.0.0.1:{_closed_port()}/%2f"
    if service == "mongodb":
        broker = rabbitmq_url
    elif service == "vhost":
        mongo, broker = "mongomock://", rabbitmq_url.rsplit("/", 1)[0] + "/no-such-vhost"
    else:
        mongo = "mongomock://"
    args = [str(BIN / "dramatiq"), "crawlsched.actors", "--processes", "1", "--threads", "1"]

    code, output, elapsed = _run([*args, "--skip-logging"], _env(mongo, broker), timeout=90)

    ours = [line for line in output.splitlines() if line.startswith("error: ")]
    expected = "MongoDB" if service == "mongodb" else "RabbitMQ"
    assert code != 0, output
    assert len(ours) == 1 and ours[0].startswith(f"error: {expected} unreachable at "), output
    assert PASSWORD not in output
    assert len(output.strip().splitlines()) <= 3, output  # ours and dramatiq's "exited (code 1)"
    assert elapsed < 60


@pytest.mark.rabbitmq
def test_worker_that_loses_the_broker_logs_the_outage_a_few_times_a_minute(rabbitmq_url, tmp_path):
    # Given a dramatiq worker connected to RabbitMQ through a proxy we can cut
    from tests.support.tcp_proxy import TcpProxy
    from tests.support.waiting import wait_for
    from tests.support.workers import DramatiqWorkers

    proxy = TcpProxy(5672).start()
    via_proxy = rabbitmq_url.replace("127.0.0.1:5672", f"127.0.0.1:{proxy.port}")
    env = _env("mongomock://", via_proxy)
    workers = DramatiqWorkers(env, processes=1, threads=2).start()
    try:
        wait_for(lambda: "ready for action" in workers.output(), 60, "the worker to be ready")
        before = len(workers.output().splitlines())

        # When the broker goes away for 40 seconds
        proxy.cut()
        time.sleep(40)
        during = workers.output().splitlines()[before:]
    finally:
        workers.kill()
        proxy.cut()

    # Then the worker keeps trying and says so, in a handful of lines, not hundreds. Only the
    # outage's own reports count: the worker's last start-up lines (a run planned, the
    # exporter started) may land after its "ready" line.
    assert any("broker connection lost" in line for line in during), during[:5]
    reports = [
        line for line in during if '"level": "critical"' in line or '"level": "error"' in line
    ]
    assert len(reports) <= 10, "\n".join(reports[:20])

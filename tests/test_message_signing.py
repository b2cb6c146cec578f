"""Messages are signed by default: a worker on RabbitMQ without a key refuses to start (unless
signing is switched off by a setting), a forged message published on the vhost is
dead-lettered and creates no run, and the standalone server signs with a key it keeps in its
data directory, so a message slipped into a saved snapshot is refused at the next start."""

from __future__ import annotations

import base64
import json
import os
import stat
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pika
import pytest
from dramatiq import Message

from crawlsched.brokers.guards import SIGNATURE_OPTION, signature
from tests.support.scratch import scratch_file
from tests.support.standalone import Standalone, standalone_env
from tests.support.waiting import wait_for
from tests.support.workers import REPO, crawlsched_env

DRAMATIQ = str(Path(sys.executable).parent / "dramatiq")


def plan_message(schedule_id: str, fire_at: str, key: bytes | None = None) -> Message:
    message = Message(
        queue_name="crawlsched.plan",
        actor_name="plan_crawls",
        args=(schedule_id, fire_at),
        kwargs={},
        options={},
        message_id=str(uuid.uuid4()),
        message_timestamp=int(time.time() * 1000),
    )
    if key is not None:
        message.options[SIGNATURE_OPTION] = signature(key, message)
    return message


def start_workers(env: dict[str, str]) -> tuple[subprocess.Popen, object]:
    log = scratch_file("dramatiq-", ".log")
    args = [DRAMATIQ, "crawlsched.actors", "--processes", "1", "--threads", "1", "--skip-logging"]
    process = subprocess.Popen(
        args, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    return process, log


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.killpg(process.pid, 15)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, 9)
            process.wait(timeout=30)


@pytest.mark.rabbitmq
def test_a_worker_on_rabbitmq_without_a_key_refuses_to_start(rabbitmq_url, embedded_mongo_url):
    env = crawlsched_env(rabbitmq_url, embedded_mongo_url, "signing")
    del env["CRAWLSCHED_MESSAGE_SIGNING_KEY"]
    process, log = start_workers(env)
    try:
        process.wait(timeout=60)
    finally:
        stop(process)
    output = Path(log.name).read_text()
    assert process.returncode != 0, output
    assert "invalid setting CRAWLSCHED_MESSAGE_SIGNING_KEY: unset" in output
    assert "CRAWLSCHED_MESSAGE_SIGNING=false" in output
    assert "Traceback" not in output


@pytest.mark.rabbitmq
def test_a_worker_with_signing_switched_off_starts_and_says_so(rabbitmq_url, embedded_mongo_url):
    env = crawlsched_env(rabbitmq_url, embedded_mongo_url, "signing")
    del env["CRAWLSCHED_MESSAGE_SIGNING_KEY"]
    env["CRAWLSCHED_MESSAGE_SIGNING"] = "false"
    process, log = start_workers(env)
    try:
        wait_for(
            lambda: "messages_unsigned" in Path(log.name).read_text() or process.poll() is not None,
            90,
            "the unsigned worker to start",
        )
        assert process.poll() is None, Path(log.name).read_text()
    finally:
        stop(process)


@pytest.mark.rabbitmq
def test_a_forged_plan_on_the_vhost_is_dead_lettered_and_creates_no_run(
    rabbitmq_url, rabbitmq_worker
):
    from crawlsched.runtime import get_runtime
    from tests.support.workers import TEST_SIGNING_KEY

    rt = get_runtime()
    forged_at, genuine_at = "2030-01-01T00:00:00+00:00", "2030-01-02T00:00:00+00:00"
    # Given a worker on RabbitMQ with the key, when anyone with publish rights on the vhost
    # sends a plan without a signature and one signed with another key
    connection = pika.BlockingConnection(pika.URLParameters(rabbitmq_url))
    try:
        channel = connection.channel()
        for key in (None, b"another-key-" + b"x" * 32):
            forged = plan_message("sweep-websites", forged_at, key)
            channel.basic_publish("", "crawlsched.plan", forged.encode())
        # and a plan signed with the right key, to show the queue is served
        genuine = plan_message("sweep-websites", genuine_at, TEST_SIGNING_KEY.encode())
        channel.basic_publish("", "crawlsched.plan", genuine.encode())
    finally:
        connection.close()
    # Then the genuine one plans a run and the forged ones none
    wait_for(lambda: rt.runs.get(run_of(genuine_at)), 60, "the genuine plan's run")
    wait_for(lambda: _depth(rabbitmq_url, "crawlsched.plan.XQ") == 2, 60, "two dead letters")
    assert rt.runs.get(run_of(forged_at)) is None


def run_of(fire_at: str) -> str:
    from datetime import datetime

    from crawlsched.planning.run_names import run_id_for

    return run_id_for("sweep-websites", datetime.fromisoformat(fire_at))


def _depth(url: str, queue: str) -> int:
    from tests.support.rabbit import queue_depth

    return queue_depth(url, queue)


def test_the_standalone_signs_with_a_key_it_keeps_and_refuses_a_forged_saved_message(tmp_path):
    env = standalone_env(tmp_path / "data")
    server = Standalone(env)
    with server:
        pass  # a first start makes the keys; the clean stop saves a snapshot
    key_file = server.data_dir / "signing.key"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    key = key_file.read_text().strip()
    assert len(key) >= 32
    # Given a saved snapshot holding a forged plan and one signed with the server's key
    messages = server.data_dir / "current" / "messages.json"
    forged = plan_message("sweep-websites", "2030-01-01T00:00:00+00:00")
    signed = plan_message("sweep-websites", "2030-01-02T00:00:00+00:00", key.encode())
    saved = json.loads(messages.read_text()) if messages.exists() else []
    for message in (forged, signed):
        saved.append(
            {"queue": "crawlsched.plan", "data": base64.b64encode(message.encode()).decode()}
        )
    messages.write_text(json.dumps(saved))
    # When the server starts again, then only the signed one plans a run
    with server:
        wait_for(lambda: _has_run(server, signed), 60, "the signed plan's run")
        wait_for(
            lambda: "missing or bad signature" in server.output(), 30, "the forged one refused"
        )
        assert not _has_run(server, forged)
    assert key_file.read_text().strip() == key  # kept across starts


def _has_run(server: Standalone, plan: Message) -> bool:
    runs = server.get("/v1/runs?limit=1000&empty=true")["items"]
    return run_of(plan.args[1]) in {r["_id"] for r in runs}

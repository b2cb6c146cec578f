"""Three tickers and two clocks racing on the real RabbitMQ, `dramatiq` CLI workers, one shared
multi-process store: every fire time is planned exactly once."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from datetime import datetime
from pathlib import Path

import pytest

from crawlsched.flow import schedule_ops
from crawlsched.planning.run_names import run_id_for
from crawlsched.runtime import Runtime
from crawlsched.schedules.triggers import trigger_of
from crawlsched.settings import Settings
from tests.support.rabbit import queue_holding
from tests.support.waiting import wait_for
from tests.support.workers import TEST_SECRET_KEY, TEST_SIGNING_KEY, DramatiqWorkers, crawlsched_env

pytestmark = [pytest.mark.rabbitmq, pytest.mark.multiprocess]

SCHEDULES = 12  # each fires every second
CLOCK_RUN_S = 30  # how long the clocks tick: 12 x 30, about 360 fire times
TICK_S = 0.3
QUEUES = ("crawlsched.ticks", "crawlsched.plan")


def fired_lines(output: str) -> list[tuple[str, str]]:
    """(schedule id, fire time) of every plan message a ticker sent (its schedule_fired log)."""
    sent = []
    for line in output.splitlines():
        if '"schedule_fired"' not in line:
            continue
        entry = json.loads(line[line.index("{") :])
        sent.append((entry["schedule_id"], entry["fire_at"]))
    return sent


def test_three_tickers_and_two_clocks_plan_each_fire_time_once(
    rabbitmq_broker, rabbitmq_url, multiprocess_mongo_url, mongo_database_name
):
    started = time.monotonic()
    # Given a dozen schedules that fire every second (sweeps of an empty collection: planning
    # is quick, so the race is all in the ticker)
    settings = Settings(
        mongo_url=multiprocess_mongo_url,
        mongo_db=mongo_database_name,
        broker_url=rabbitmq_url,
        secret_key=TEST_SECRET_KEY,
        message_signing_key=TEST_SIGNING_KEY,
    )
    rt = Runtime(settings)
    rt.create_indexes()
    ids = [f"race-{i:02d}" for i in range(SCHEDULES)]
    for schedule_id in ids:
        schedule_ops.create(
            rt,
            schedule_id,
            {"interval_s": 1, "collections": ["websites"], "misfire": "catch_up",
             "catch_up_limit": 1000},
        )  # fmt: skip
    env = crawlsched_env(rabbitmq_url, multiprocess_mongo_url, mongo_database_name)
    cli = str(Path(sys.executable).parent / "crawlsched")
    # When three ticker workers (separate `dramatiq` process groups) and two clocks run
    tickers = [DramatiqWorkers(env, processes=1, threads=2, queues=QUEUES) for _ in range(3)]
    for ticker in tickers:
        ticker.start()
    try:
        count = str(int(CLOCK_RUN_S / TICK_S))
        clocks = [
            subprocess.Popen(
                [cli, "clock", "--interval", str(TICK_S), "--count", count],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
            for _ in range(2)
        ]
        for clock in clocks:
            assert clock.wait(timeout=CLOCK_RUN_S + 30) == 0, clock.stderr.read().decode()[-2000:]
        # No tick left, not even one a ticker holds: the schedules' counts are final.
        wait_for(lambda: queue_holding(rabbitmq_url, "crawlsched.ticks") == 0, 60, "ticks done")
        # Every fire time the schedules counted reaches its run, however long its plan message
        # takes (a message being planned is unacked, one whose store call failed under load
        # waits in the delay queue for its retry).
        wait_for(
            lambda: (
                rt.db.runs.count_documents({}) >= sum(rt.schedules.get(s)["fired"] for s in ids)
            ),
            180,
            "every fire time planned",
        )
    finally:
        for ticker in tickers:
            ticker.stop()
    outputs = [ticker.output() for ticker in tickers]

    # Then every plan message sent is for a fire time no other ticker sent
    sent = [pair for output in outputs for pair in fired_lines(output)]
    per_fire_time = Counter(sent)
    assert len(sent) >= 300, f"only {len(sent)} fire times in {CLOCK_RUN_S}s"
    assert max(per_fire_time.values()) == 1, per_fire_time.most_common(3)
    assert all(fired_lines(output) for output in outputs), "a ticker never won a fire time"
    # and each became exactly one run, and the schedules counted each once
    runs = {doc["_id"] for doc in rt.db.runs.find({}, {"_id": 1})}
    expected_runs = {run_id_for(s, datetime.fromisoformat(at)) for s, at in sent}
    assert runs == expected_runs
    assert sum(rt.schedules.get(s)["fired"] for s in ids) == len(sent)
    # and no fire time was skipped: each schedule's times up to its next one are all accounted
    missed = {(m["schedule_id"], m["fire_at"]) for m in rt.db.missed_runs.find({})}
    for schedule_id in ids:
        doc = rt.schedules.get(schedule_id)
        trigger = trigger_of(doc)
        times = list(trigger.times_between(doc["anchor"], doc["next_fire_at"]))[:-1]
        mine = {datetime.fromisoformat(at) for s, at in sent if s == schedule_id}
        mine |= {at for s, at in missed if s == schedule_id}
        assert {doc["anchor"], *times} == mine, schedule_id
    print(f"{len(sent)} fire times planned once each in {time.monotonic() - started:.0f}s")

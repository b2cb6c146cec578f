"""Publisher confirms and quorum queues on the real RabbitMQ, each in a virtual host of its own.

- A batch RabbitMQ refuses (a queue policy that rejects every publish: RabbitMQ answers with a
  nack, as it does when a queue is full or its node lost its majority) makes the planner raise,
  and its jobs are pending again at once, not held until the dispatch lease runs out.
- Quorum queues: every queue crawlsched declares is quorum (its delay and dead-letter queues
  too); a message handed out more times than the delivery limit is dead-lettered, one on a delay
  queue never is; a queue already declared with another type is one clear error.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator

import pika
import pytest
from dramatiq.errors import ConnectionClosed

from crawlsched.catalog import JobState
from crawlsched.demo.seed import demo_reference
from crawlsched.errors import QueueDeclaredOtherwise
from crawlsched.flow.planning import plan_run
from crawlsched.planning.run_names import run_id_for
from crawlsched.runtime import get_runtime
from tests.support import rabbit
from tests.test_recovery import _websites

pytestmark = pytest.mark.rabbitmq


@pytest.fixture
def vhost() -> Iterator[rabbit.TestVhost]:
    if not rabbit.listening():
        pytest.skip("RabbitMQ is not listening")  # the suite's rabbitmq_url fixture fails CI
    own = rabbit.TestVhost().create()
    yield own
    own.delete()


def _broker(vhost: rabbit.TestVhost, mongo_url: str, **fields):
    from tests.conftest import _broker_for, settings_for_tests

    return _broker_for(settings_for_tests(mongo_url=mongo_url, broker_url=vhost.url, **fields))


def _rabbitmqctl(*args: str) -> str:
    done = subprocess.run(
        ["rabbitmqctl", "-q", *args], check=True, capture_output=True, text=True, timeout=60
    )
    return done.stdout


def _refuse_every_publish(vhost: rabbit.TestVhost) -> None:
    definition = json.dumps({"max-length": 0, "overflow": "reject-publish"})
    _rabbitmqctl("set_policy", "-p", vhost.name, "refuse", "^crawlsched\\.", definition)


def _seeded(mongo_url: str, jobs: int):
    rt = get_runtime()
    assert rt.settings.mongo_url == mongo_url
    rt.create_indexes()
    rt.reference.load(demo_reference("http://127.0.0.1:9"))
    rt.schedules.ensure_defaults(rt.now())
    return rt, _websites(rt, jobs)


def test_a_batch_rabbitmq_refuses_is_not_dispatched(vhost, embedded_mongo_url):
    # Given 120 due website jobs and a broker with publisher confirms (the default)
    from crawlsched.actors.sends import send_batch as dispatch

    broker = _broker(vhost, embedded_mongo_url)
    assert broker.confirm_delivery is True
    rt, ids = _seeded(embedded_mongo_url, 120)
    fire_at = rt.now().replace(microsecond=0)
    # And a RabbitMQ that refuses every message to crawlsched's queues
    broker.declare_queue("crawlsched.crawl.article", ensure=True)
    _refuse_every_publish(vhost)

    # When the planner plans the firing, it fails loudly
    with pytest.raises(ConnectionClosed):
        plan_run(rt, "sweep-websites", fire_at, dispatch)

    # Then no batch counts as dispatched: every job is pending again, in no run, under no
    # dispatch, with no attempt counted, and planning is still open for the retry
    for doc in rt.db.websites.find({}):
        assert doc["state"] == int(JobState.PENDING), doc
        assert "dispatch_id" not in doc and "run_id" not in doc
        assert doc.get("attempt_count", 0) == 0
    run = rt.runs.get(run_id_for("sweep-websites", fire_at))
    assert run["planning"] is True and not run.get("plan_stats")

    # When RabbitMQ takes messages again and the plan is retried
    _rabbitmqctl("clear_policy", "-p", vhost.name, "refuse")
    closed = plan_run(rt, "sweep-websites", fire_at, dispatch)

    # Then every job is planned once and its batch is on the crawl queue
    assert closed is not None and closed["planned"] == len(ids) == 120
    assert rt.db.websites.count_documents({"state": int(JobState.RUNNING)}) == 120
    waiting = broker.get_queue_message_counts("crawlsched.crawl.article")[0]
    assert waiting == 3  # web's batch limit is 50: 50 + 50 + 20
    broker.close()


def _queue_types(vhost: rabbit.TestVhost) -> dict[str, str]:
    out = _rabbitmqctl("list_queues", "-p", vhost.name, "name", "type", "--no-table-headers")
    return dict(line.split("\t")[:2] for line in out.splitlines() if "\t" in line)


def test_quorum_queues_are_declared_for_every_queue_of_every_actor(vhost, embedded_mongo_url):
    broker = _broker(vhost, embedded_mongo_url, queue_type="quorum")
    for queue in broker.get_declared_queues():
        broker.declare_queue(queue, ensure=True)
    types = _queue_types(vhost)
    ours = {name: kind for name, kind in types.items() if name.startswith("crawlsched.")}
    # Every actor queue with its delay (.DQ) and dead-letter (.XQ) queue
    assert len(ours) == 3 * len(broker.get_declared_queues()) > 3
    assert set(ours.values()) == {"quorum"}, ours
    broker.close()


def test_a_queue_of_another_type_is_one_clear_error(vhost, embedded_mongo_url):
    classic = _broker(vhost, embedded_mongo_url)
    classic.declare_queue("crawlsched.done", ensure=True)
    classic.close()
    quorum = _broker(vhost, embedded_mongo_url, queue_type="quorum")
    with pytest.raises(QueueDeclaredOtherwise, match=r"crawlsched\.done.*CRAWLSCHED_QUEUE_TYPE"):
        quorum.declare_queue("crawlsched.done", ensure=True)
    quorum.close()


def _hand_out_and_return(url: str, queue: str, times: int) -> int:
    """Take the head message of `queue` and hand it back unacked, `times` times at most, as a
    worker that dies mid-message does; returns how many times it was handed out."""
    connection = pika.BlockingConnection(pika.URLParameters(url))
    try:
        channel = connection.channel()
        for handed in range(times):
            method, _, _ = channel.basic_get(queue, auto_ack=False)
            if method is None:
                return handed
            channel.basic_nack(method.delivery_tag, requeue=True)
        return times
    finally:
        connection.close()


def _depth(broker, queue: str) -> tuple[int, int, int]:
    return broker.get_queue_message_counts(queue)


def _settled_depth(
    broker, queue: str, expected: tuple[int, int, int], timeout_s: float = 30.0
) -> tuple[int, int, int]:
    """The (main, delay, dead-letter) depths once they read `expected`, or the last read after
    `timeout_s`. A quorum queue applies a returned or dead-lettered message through its log,
    so a count read right after the return may not show it yet (a CI run read (0, 0, 0))."""
    deadline = time.monotonic() + timeout_s
    while (depth := _depth(broker, queue)) != expected and time.monotonic() < deadline:
        time.sleep(0.2)
    return depth


@pytest.mark.parametrize("limit", [2, 5])
def test_quorum_main_queue_dead_letters_a_message_past_its_delivery_limit(
    vhost, embedded_mongo_url, limit
):
    broker = _broker(vhost, embedded_mongo_url, queue_type="quorum", quorum_delivery_limit=limit)
    queue = "crawlsched.done"
    broker.declare_queue(queue, ensure=True)
    broker.channel.basic_publish("", queue, b"poison", pika.BasicProperties(delivery_mode=2))
    # When workers die on it again and again: it is handed out `limit` times, then no more
    handed = _hand_out_and_return(vhost.url, queue, limit + 5)
    # (3.x hands it out limit + 1 times: the limit counts returns, not deliveries)
    assert limit <= handed <= limit + 1
    # Then it sits in the dead-letter queue, not in the queue
    assert _settled_depth(broker, queue, (0, 0, 1)) == (0, 0, 1)
    broker.close()


def test_quorum_delay_queue_never_dead_letters_a_held_message(vhost, embedded_mongo_url):
    broker = _broker(vhost, embedded_mongo_url, queue_type="quorum", quorum_delivery_limit=2)
    queue = "crawlsched.done"
    broker.declare_queue(queue, ensure=True)
    delay_queue = f"{queue}.DQ"
    broker.channel.basic_publish("", delay_queue, b"retry", pika.BasicProperties(delivery_mode=2))
    # Held and handed back ten times (a worker restart each time), far past the main limit
    assert _hand_out_and_return(vhost.url, delay_queue, 10) == 10
    assert _settled_depth(broker, queue, (0, 1, 0)) == (0, 1, 0)
    broker.close()

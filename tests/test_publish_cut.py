"""A connection cut while a batch is being published, through a proxy the test controls.

The whole flow runs on the real RabbitMQ (in-process worker threads, embedded store) with every
connection through `AmqpCutProxy`, which cuts the connection that publishes the first crawl
batch: once before RabbitMQ gets the message (it is lost), once after RabbitMQ has it but before
its confirm comes back (the sender cannot know, and sends it again). The dispatch lease is an
hour, so a run that finishes did not wait for a lost batch to be reclaimed: with publisher
confirms the batch is sent again at once, and a batch that arrives twice is recorded once.
"""

from __future__ import annotations

from collections import Counter

import pytest
from dramatiq import Worker

from crawlsched.demo.seed import demo_reference
from crawlsched.runtime import get_runtime
from crawlsched.store.runs import FINISHED
from tests.support import rabbit
from tests.support.amqp_cut import AmqpCutProxy
from tests.support.waiting import wait_for
from tests.test_recovery import _websites

pytestmark = pytest.mark.rabbitmq

JOBS = 120  # web's batch limit is 50: three batches


@pytest.fixture
def vhost():
    if not rabbit.listening():
        pytest.skip("RabbitMQ is not listening")
    own = rabbit.TestVhost().create()
    yield own
    own.delete()


@pytest.mark.parametrize("mode", ["lose", "lose_confirm"])
def test_a_batch_cut_off_in_flight_is_sent_again_and_recorded_once(vhost, embedded_mongo_url, mode):
    from tests.conftest import _broker_for, settings_for_tests

    proxy = AmqpCutProxy(rabbit.PORT, "crawlsched.crawl.", mode).start()
    url = f"amqp://guest:guest@127.0.0.1:{proxy.port}/{vhost.name}"
    broker = _broker_for(
        settings_for_tests(mongo_url=embedded_mongo_url, broker_url=url, dispatch_lease_s=3600)
    )
    worker = Worker(broker, worker_timeout=100, worker_threads=4)
    worker.start()
    try:
        from crawlsched.actors.planner import plan_crawls

        # Given 120 due website jobs
        rt = get_runtime()
        rt.create_indexes()
        rt.reference.load(demo_reference("http://127.0.0.1:9"))
        rt.schedules.ensure_defaults(rt.now())
        ids = _websites(rt, JOBS)
        fire_at = rt.now().replace(microsecond=0)

        # When the sweep is planned and the first batch's publish is cut off
        plan_crawls.send("sweep-websites", fire_at.isoformat())
        runs = wait_for(
            lambda: [r for r in rt.runs.recent() if r["state"] == FINISHED],
            120,
            "the run to finish (a lost batch would wait for the one-hour dispatch lease)",
        )
    finally:
        worker.stop()
        broker.close()
        proxy.cut()

    # Then the cut happened, on a crawl batch
    assert proxy.cut_routing_keys == ["crawlsched.crawl.article"]
    # And every job ended exactly once: counted once by the run, one execution in history
    (run,) = runs
    assert run["planned"] == JOBS
    assert sum(run["counts"].values()) == JOBS, run["counts"]
    executions = Counter(row["job_id"] for row in rt.db.task_history.find({}, {"job_id": 1}))
    assert set(executions) == {f"oid:{job_id}" for job_id in ids}
    assert set(executions.values()) == {1}
    assert rt.db.websites.count_documents({"dispatch_id": {"$exists": True}}) == 0

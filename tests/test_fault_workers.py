"""A `dramatiq` worker group SIGKILLed in the middle of crawling a slow link graph on the real
RabbitMQ and the multi-process MongoDB server, a new group started: every reachable page is
fetched and stored in the run or given up with a reason, nothing is counted twice, the run ends
once after its last fetch with the result its pages call for, its end event reaches the events
exchange and its webhook arrives, no lease is held, nothing is left running
(tests/support/fault_checks.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.fault_distributed import Services, distributed_trial
from tests.support.fault_standalone import after_fetches
from tests.support.link_graph import layered_graph

pytestmark = [pytest.mark.rabbitmq, pytest.mark.multiprocess]

# 40 pages over four levels, 3 dead links, 3 redirects: 46 URLs to crawl.
GRAPH = layered_graph(40, seed=25, fan_out=3, dead=3, redirects=3)
DELAY_S = 0.3


def test_worker_group_sigkill_mid_crawl_loses_no_page(
    rabbitmq_broker, rabbitmq_url, multiprocess_mongo_url, tmp_path: Path
):
    # rabbitmq_broker declares the queues in the test's vhost before the workers start.
    services = Services(rabbitmq_url, multiprocess_mongo_url)
    reachable = len(GRAPH.reachable())
    # Given a crawl under way, when the worker group is SIGKILLed with about a third of the
    # pages fetched, and a new group started
    trial = distributed_trial(
        services, tmp_path, GRAPH, DELAY_S, "worker", after_fetches(reachable // 3)
    )
    # Then the run is right by every invariant, and the kill did happen mid-run
    assert trial.fault_at is not None, "the run ended before the kill"
    problems = trial.check.problems()
    if problems:
        for log in services.logs:
            print(f"--- {log}\n{log.read_text(errors='replace')[-3000:]}")
    assert problems == [], trial.check
    print(
        f"outcomes {trial.check.outcomes}, fetched twice {trial.check.fetched_twice}, "
        f"recovery {trial.recovery_s:.1f}s"
    )

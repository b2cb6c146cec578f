"""Shared fixtures. Harness logic lives in tests/support; fixtures here stay thin."""

import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings
from pymongo.errors import PyMongoError

from tests.support.factories import STORE_BACKENDS, open_store
from tests.support.mongo_server import (
    MongoecoServer,
    drop_session_databases,
    fresh_database_name,
    ping,
)
from tests.support.rabbit import TestVhost
from tests.support.scratch import cleanup as cleanup_scratch
from tests.support.services import service_unavailable
from tests.support.workers import TEST_HOST_RULES, TEST_SECRET_KEY, TEST_SIGNING_KEY

TEST_MONGO_URL_ENV = "CRAWLSCHED_TEST_MONGO_URL"

# No wall-clock limit anywhere in the suite: a busy or slow machine must not fail a property test
# whose logic is right. So no deadline, and no "too slow" health check (it times data
# generation). Individual tests may change max_examples, never set a deadline.
hypothesis_settings.register_profile(
    "crawlsched",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,
)
hypothesis_settings.load_profile("crawlsched")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Remove what the helpers wrote; after a failure keep it and say where (workers' logs)."""
    kept = cleanup_scratch(keep=exitstatus != 0)
    if kept:
        print(f"\ntest helpers' logs kept in {kept}")


@pytest.fixture(scope="session")
def multiprocess_mongo_url() -> Iterator[str]:
    """A MongoDB URL that several OS processes can share for the whole session.

    A real mongod when CRAWLSCHED_TEST_MONGO_URL is set, else a mongoeco server we start.
    Tests must keep their data apart with `mongo_database_name`.
    """
    if url := os.environ.get(TEST_MONGO_URL_ENV):
        try:
            ping(url, timeout=10)
        except PyMongoError as exc:
            service_unavailable(f"{TEST_MONGO_URL_ENV}={url} does not answer ping: {exc}")
        yield url
        drop_session_databases(url)
        return
    try:
        server = MongoecoServer().start()
    except (RuntimeError, OSError) as exc:
        service_unavailable(f"multi-process MongoDB (mongoeco) unavailable: {exc}")
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture
def mongo_database_name(request: pytest.FixtureRequest) -> str:
    """A database name unique to this test, so tests sharing one server never see each other."""
    return fresh_database_name(request.node.name)


# ---- brokers and workers (dramatiq's fixture style) ----------------------------------------


@pytest.fixture
def embedded_mongo_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh embedded (mongomock) store for one test, dropped afterwards."""
    from crawlsched.store.client import drop_embedded

    url = f"mongomock://{request.node.name}-{uuid.uuid4().hex[:8]}"
    yield url
    drop_embedded(url)


def settings_for_tests(**fields):
    from crawlsched.settings import Settings

    # RabbitMQ's messages are signed (the settings refuse it without a key); the in-process
    # broker signs only when a test gives it a key (forged test messages stay unsigned).
    shared = not str(fields.get("broker_url", "stub://")).startswith("stub://")
    signing = {"message_signing_key": TEST_SIGNING_KEY} if shared else {}
    return Settings(
        log_format="json",
        secret_key=TEST_SECRET_KEY,
        browser_host_resolver_rules=TEST_HOST_RULES,
        # The tests' sites and nodes are local and small: no per-host delay unless asked.
        **{
            "target_allow_networks": ["127.0.0.1/32"],
            "node_allow_networks": ["127.0.0.1/32"],
            "host_delay_s": 0.0,
            **signing,
            **fields,
        },
    )


def _broker_for(settings):
    from crawlsched.brokers import setup_broker

    broker = setup_broker(settings)
    import crawlsched.actors  # noqa: F401  (declares every actor on this broker)

    broker.flush_all()
    return broker


@pytest.fixture
def stub_broker(embedded_mongo_url: str) -> Iterator:
    broker = _broker_for(settings_for_tests(mongo_url=embedded_mongo_url, broker_url="stub://"))
    yield broker
    broker.flush_all()
    broker.close()


@pytest.fixture
def stub_pipeline(embedded_mongo_url: str) -> Iterator:
    """A factory: `stub_pipeline(**settings)` starts a StubBroker and worker threads on the
    test's embedded store with those settings, and stops them after the test."""
    from dramatiq import Worker

    started = []

    def start(threads: int = 4, **fields):
        broker = _broker_for(
            settings_for_tests(mongo_url=embedded_mongo_url, broker_url="stub://", **fields)
        )
        worker = Worker(broker, worker_timeout=100, worker_threads=threads)
        worker.start()
        started.append((broker, worker))
        return broker, worker

    yield start
    for broker, worker in started:
        worker.stop()
        broker.flush_all()
        broker.close()


@pytest.fixture
def stub_worker(stub_broker) -> Iterator:
    from dramatiq import Worker

    worker = Worker(stub_broker, worker_timeout=100, worker_threads=4)
    worker.start()
    yield worker
    worker.stop()


@pytest.fixture(scope="session")
def rabbitmq_url() -> Iterator[str]:
    """The real RabbitMQ on 127.0.0.1:5672, in a virtual host of this session's own."""
    vhost = TestVhost()
    try:
        vhost.create()
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        service_unavailable(f"RabbitMQ unavailable: {exc}")
    yield vhost.url
    vhost.delete()


@pytest.fixture
def rabbitmq_broker(rabbitmq_url: str, embedded_mongo_url: str) -> Iterator:
    broker = _broker_for(settings_for_tests(mongo_url=embedded_mongo_url, broker_url=rabbitmq_url))
    yield broker
    broker.flush_all()
    broker.close()


@pytest.fixture
def rabbitmq_worker(rabbitmq_broker) -> Iterator:
    from dramatiq import Worker

    worker = Worker(rabbitmq_broker, worker_timeout=100, worker_threads=4)
    worker.start()
    yield worker
    worker.stop()


@pytest.fixture(params=STORE_BACKENDS)
def store(request):
    """A job store on each backend in turn: embedded (mongomock) and the multi-process server."""
    yield from open_store(request)


@pytest.fixture(scope="session")
def chromedriver_node() -> Iterator[str]:
    """A real chromedriver on a loopback port for the whole session: a Selenium node."""
    from crawlsched.demo.node import LocalChromedriver

    if not LocalChromedriver.available():
        service_unavailable("chromedriver is not installed (Debian: chromium chromium-driver)")
    node = LocalChromedriver()
    try:
        node.start()
    except RuntimeError as exc:
        service_unavailable(f"chromedriver did not start: {exc}")
    yield node.url
    node.stop()


@pytest.fixture(scope="session")
def selenium_grid() -> Iterator:
    """A Selenium Grid 4 standalone (2 Chrome slots) on a loopback port, for the session."""
    from tests.support.grid import SeleniumGrid

    grid = SeleniumGrid(sessions=2)
    try:
        grid.start()
    except (RuntimeError, OSError) as exc:
        service_unavailable(f"Selenium Grid unavailable: {exc}")
    yield grid
    grid.stop()


# Fixtures that start a real browser (chromedriver or a Selenium Grid): a test using one is
# marked `browser`, so `-m "not browser"` leaves them out (as scripts/mutation does).
BROWSER_FIXTURES = {"chromedriver_node", "selenium_grid"}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "browser: starts a real browser (chromedriver or Grid)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if BROWSER_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.browser)
    # Longest work first (under pytest-xdist a file is one unit of work): the whole-deployment
    # files, then the files that start worker processes, then those on RabbitMQ or a browser,
    # then the rest. Started first, the long files run beside the many short ones instead of
    # leaving one process alone with them at the end (the suite's tail).
    tier: dict[str, int] = {}
    for item in items:
        path = item.nodeid.split("::", 1)[0]
        tier[path] = min(tier.get(path, 3), _tier(item, Path(path).name))
    items.sort(key=lambda item: tier[item.nodeid.split("::", 1)[0]])


# Files that start `crawlsched standalone` servers (each a subprocess with its own start-up)
# and run a crawl or a schema fuzz against them: long without a marker saying so.
LONG_STANDALONE_FILES = {
    "test_readme_walkthrough.py",
    "test_job_bounds_crawl.py",
    "test_standalone.py",
    "test_api_schema.py",
    "test_datadir_modes.py",
    "test_api_remote_boundary.py",
    "test_crawl_command.py",
}


def _tier(item: pytest.Item, file_name: str) -> int:
    if file_name in WHOLE_DEPLOYMENTS:
        return 0
    if item.get_closest_marker("multiprocess") or file_name in LONG_STANDALONE_FILES:
        return 1
    if item.get_closest_marker("rabbitmq") or item.get_closest_marker("browser"):
        return 2
    return 3


# Under pytest-xdist a test file runs in one process, so its module-scoped fixtures start once,
# and the files that start a whole deployment (a RabbitMQ cluster, a crash of every process)
# run one after another in the same process, never two at once on two cores.
WHOLE_DEPLOYMENTS = {
    "test_rabbit_cluster.py",
    "test_fault_workers.py",
    "test_fault_standalone.py",
}


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    from xdist.scheduler import LoadScopeScheduling

    class ByFile(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return "whole deployments" if Path(path).name in WHOLE_DEPLOYMENTS else path

    return ByFile(config, log)


@pytest.fixture
def registry():
    """crawlsched's metrics switched on into a registry of the test's own."""
    from prometheus_client import CollectorRegistry

    from crawlsched import metrics

    registry = CollectorRegistry()
    metrics.enable(registry)
    yield registry
    metrics.disable()

"""The command line on a fresh embedded store of the test's own (init-db run), as a user types
it: `run("jobs", "list", …)` gives typer's Result."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterator

import pytest
from typer.testing import CliRunner, Result

from crawlsched.cli import app
from crawlsched.logs import configure_logging
from crawlsched.store.client import drop_embedded

Invoke = Callable[..., Result]


@contextlib.contextmanager
def cli_on_fresh_store(monkeypatch: pytest.MonkeyPatch, name: str) -> Iterator[tuple[Invoke, str]]:
    """(run, store URL); the store is dropped when the block ends."""
    url = f"mongomock://{name}-{uuid.uuid4().hex}"
    monkeypatch.setenv("CRAWLSCHED_MONGO_URL", url)
    monkeypatch.setenv("CRAWLSCHED_BROKER_URL", "stub://")
    # The tests' Selenium nodes run on loopback.
    monkeypatch.setenv("CRAWLSCHED_NODE_ALLOW_NETWORKS", '["127.0.0.1/32"]')
    runner = CliRunner()

    def run(*args: str) -> Result:
        result = runner.invoke(app, list(args))
        # A command that set the broker up pointed the logs at the runner's stream, now closed.
        configure_logging("json", "INFO")
        return result

    assert run("init-db").exit_code == 0
    try:
        yield run, url
    finally:
        drop_embedded(url)

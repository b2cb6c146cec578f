"""The API served by a real uvicorn on a loopback port, in a thread of the test process."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import uvicorn

from tests.support.waiting import wait_for


def seeded_runtime(mongo_url: str) -> Any:
    """A runtime on `mongo_url` with the packaged reference data and the default sweeps."""
    from crawlsched.reference import load_reference
    from crawlsched.runtime import Runtime
    from tests.conftest import settings_for_tests

    rt = Runtime(settings_for_tests(mongo_url=mongo_url, broker_url="stub://"))
    rt.create_indexes()
    rt.reference.load(load_reference())
    rt.schedules.ensure_defaults(rt.now())
    return rt


@contextmanager
def serving(mongo_url: str) -> Iterator[ApiServer]:
    """The API over a fresh seeded embedded store, dropped afterwards."""
    from crawlsched.store.client import drop_embedded

    try:
        with ApiServer(seeded_runtime(mongo_url)) as server:
            yield server
    finally:
        drop_embedded(mongo_url)


@dataclass
class ApiServer:
    """`with ApiServer(runtime) as api:` serves `create_app(runtime)` on 127.0.0.1."""

    runtime: Any
    delivers: bool = False

    def __enter__(self) -> ApiServer:
        from crawlsched.api import create_app

        self.app = create_app(self.runtime, delivers=self.delivers)
        config = uvicorn.Config(
            self.app, host="127.0.0.1", port=0, log_level="warning", lifespan="off"
        )
        self.server = uvicorn.Server(config)
        # A thread is not the main thread: uvicorn installs no signal handlers there.
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        wait_for(lambda: self.server.started, 30, "uvicorn to listen")
        port = self.server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        rt = self.runtime
        _, self.admin_token = rt.tokens.create("admin", "tests-admin", rt.now())
        _, self.read_token = rt.tokens.create("read", "tests-read", rt.now())
        self.admin = httpx.Client(
            base_url=self.url, headers={"Authorization": f"Bearer {self.admin_token}"}
        )
        self.reader = httpx.Client(
            base_url=self.url, headers={"Authorization": f"Bearer {self.read_token}"}
        )
        self.anonymous = httpx.Client(base_url=self.url)
        return self

    def __exit__(self, *exc: object) -> None:
        for client in (self.admin, self.reader, self.anonymous):
            client.close()
        self.server.should_exit = True
        self.thread.join(timeout=30)

"""`crawlsched api serve` as a process on MongoDB and RabbitMQ: /health names both services,
tokens made by the CLI work, a broker that cannot be reached turns /health into 503, and
SIGTERM (what Kubernetes and docker send) stops it cleanly: exit 0, no traceback."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.support.ports import free_port
from tests.support.scratch import scratch_file
from tests.support.standalone import CLI
from tests.support.waiting import wait_for
from tests.support.workers import REPO, crawlsched_env


@contextmanager
def api_serve(env: dict[str, str]) -> Iterator[str]:
    port = free_port()
    log = scratch_file("api-serve-", ".log")
    process = subprocess.Popen(
        [CLI, "api", "serve", "--port", str(port)], cwd=REPO, env=env, stdout=log, stderr=log
    )
    url = f"http://127.0.0.1:{port}"

    def answering() -> bool:
        assert process.poll() is None, Path(log.name).read_text()[-2000:]
        try:
            httpx.get(f"{url}/health", timeout=5)
        except httpx.HTTPError:
            return False
        return True

    try:
        wait_for(answering, 60, "crawlsched api serve")
        yield url
    finally:
        process.terminate()  # SIGTERM
        code = process.wait(timeout=30)
    output = Path(log.name).read_text(errors="replace")
    assert code == 0 and "Traceback" not in output, output[-3000:]


@pytest.mark.rabbitmq
@pytest.mark.multiprocess
def test_api_serve_on_mongodb_and_rabbitmq(
    rabbitmq_url: str, multiprocess_mongo_url: str, mongo_database_name: str
):
    env = crawlsched_env(rabbitmq_url, multiprocess_mongo_url, mongo_database_name)
    created = subprocess.run(
        [CLI, "tokens", "create", "--role", "read", "--name", "t", "--json"],
        cwd=REPO, env=env, capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    token = json.loads(created.stdout)["token"]
    with api_serve(env) as url:
        health = httpx.get(f"{url}/health").json()
        assert health == {"status": "ok", "mongodb": {"ok": True}, "broker": {"ok": True}}
        stats = httpx.get(f"{url}/v1/stats", headers={"Authorization": f"Bearer {token}"})
        assert stats.status_code == 200
        assert httpx.get(f"{url}/v1/stats").status_code == 401
    dead_broker = {**env, "CRAWLSCHED_BROKER_URL": "amqp://guest:guest@127.0.0.1:1/%2F"}
    with api_serve({**dead_broker, "CRAWLSCHED_CONNECT_TIMEOUT_S": "1"}) as url:
        health = httpx.get(f"{url}/health", timeout=30)
        assert health.status_code == 503
        body = health.json()
        assert body["mongodb"] == {"ok": True} and body["broker"]["ok"] is False

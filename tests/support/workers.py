"""Real dramatiq workers started with the `dramatiq` CLI in subprocesses (their own sessions)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from crawlsched.resources.secrets import generate_key
from tests.support.ports import free_port
from tests.support.scratch import scratch_dir, scratch_file

REPO = Path(__file__).resolve().parents[2]
# One key for the whole test session: in-process runtimes and CLI workers must agree on it.
TEST_SECRET_KEY = generate_key()
# Messages on RabbitMQ are signed (settings refuse it without a key): one for the session.
TEST_SIGNING_KEY = "test-signing-key-" + "s" * 32
# Only loopback resolves in test browsers: a crawl can never leave the machine.
TEST_HOST_RULES = "MAP * ~NOTFOUND , EXCLUDE 127.0.0.1"


def crawlsched_env(broker_url: str, mongo_url: str, mongo_db: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRAWLSCHED_")}
    # Every worker group its own metrics directory and exporter port: groups of one test, and
    # tests of other checkouts on this machine, never share them.
    env.update(
        CRAWLSCHED_METRICS_DIR=str(scratch_dir("metrics-")),
        CRAWLSCHED_METRICS_ADDRESS=f"127.0.0.1:{free_port()}",
    )
    env.update(
        CRAWLSCHED_BROKER_URL=broker_url,
        CRAWLSCHED_MONGO_URL=mongo_url,
        CRAWLSCHED_MONGO_DB=mongo_db,
        CRAWLSCHED_LOG_FORMAT="json",
        CRAWLSCHED_SECRET_KEY=TEST_SECRET_KEY,
        CRAWLSCHED_MESSAGE_SIGNING_KEY=TEST_SIGNING_KEY,
        CRAWLSCHED_BROWSER_HOST_RESOLVER_RULES=TEST_HOST_RULES,
        CRAWLSCHED_TARGET_ALLOW_NETWORKS='["127.0.0.1/32"]',
        CRAWLSCHED_NODE_ALLOW_NETWORKS='["127.0.0.1/32"]',
        CRAWLSCHED_HOST_DELAY_S="0",
        PYTHONPATH=str(REPO),
    )
    env.update(extra)
    return env


class DramatiqWorkers:
    """`dramatiq crawlsched.actors --processes P --threads T` as a subprocess group."""

    def __init__(self, env: dict[str, str], processes: int = 2, threads: int = 2, queues=()):
        self.env = env
        self.args = [
            str(Path(sys.executable).parent / "dramatiq"),
            "crawlsched.actors",
            "--processes", str(processes),
            "--threads", str(threads),
            "--skip-logging",
            "--worker-shutdown-timeout", "5000",
        ]  # fmt: skip
        if queues:
            self.args += ["--queues", *queues]
        # Kept until the session ends (all of it, if a test failed): the workers' output.
        self.log = scratch_file("dramatiq-", ".log")
        self.process: subprocess.Popen | None = None

    def start(self) -> DramatiqWorkers:
        self.process = subprocess.Popen(
            self.args,
            cwd=REPO,
            env=self.env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # one process group: SIGKILL reaches the forked workers too
        )
        return self

    def output(self) -> str:
        return Path(self.log.name).read_text(errors="replace")

    def kill(self) -> None:
        """SIGKILL the whole group at once, as a crash or an OOM kill would."""
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)

    def terminate(self, within_s: float = 120.0) -> tuple[float, int]:
        """SIGTERM to the group's main process only (as Kubernetes and docker send it to a
        container's first process; it passes it on to its workers once). Waits for the exit:
        seconds it took, and the exit code (SIGKILL after `within_s`: code -9)."""
        assert self.process is not None and self.process.poll() is None
        began = time.monotonic()
        self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(timeout=within_s)
        except subprocess.TimeoutExpired:
            self.kill()
            code = self.process.wait(timeout=10)
        return time.monotonic() - began, code

    def stop(self) -> None:
        if not self.process or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.kill()

    def __enter__(self) -> DramatiqWorkers:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

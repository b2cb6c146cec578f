"""A real Prometheus server (Debian `prometheus`) on a free loopback port, for one test module."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import httpx
import yaml

from tests.support.ports import free_port
from tests.support.waiting import wait_for


def promtool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["promtool", *args], capture_output=True, text=True, timeout=60, check=False
    )


class PrometheusServer:
    """Scrapes `targets` (job name → ["host:port", …]) every second; evaluates the rules of
    `rules` (the text of a rule file) every second and sends alerts to `alertmanagers`."""

    def __init__(
        self,
        targets: dict[str, list[str]],
        rules: str | None = None,
        alertmanagers: list[str] = (),
    ) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.dir = Path(tempfile.mkdtemp(prefix="prometheus-"))
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "scrape_configs": [
                {"job_name": job, "static_configs": [{"targets": addresses}]}
                for job, addresses in targets.items()
            ],
        }
        if rules is not None:
            (self.dir / "rules.yml").write_text(rules)
            config["rule_files"] = [str(self.dir / "rules.yml")]
        if alertmanagers:
            config["alerting"] = {
                "alertmanagers": [{"static_configs": [{"targets": list(alertmanagers)}]}]
            }
        (self.dir / "prometheus.yml").write_text(yaml.safe_dump(config))
        self.log = self.dir / "prometheus.log"
        self.process: subprocess.Popen | None = None

    @staticmethod
    def available() -> bool:
        return shutil.which("prometheus") is not None

    def start(self) -> PrometheusServer:
        self.process = subprocess.Popen(
            [
                "prometheus",
                f"--config.file={self.dir / 'prometheus.yml'}",
                f"--storage.tsdb.path={self.dir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
            ],
            stdout=self.log.open("w"),
            stderr=subprocess.STDOUT,
        )

        def ready() -> bool:
            if self.process.poll() is not None:
                raise RuntimeError(f"prometheus exited: {self.log.read_text()[-2000:]}")
            try:
                return httpx.get(f"{self.url}/-/ready", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        wait_for(ready, 60, "prometheus to be ready", interval=0.2)
        return self

    def query(self, expr: str) -> list[dict]:
        reply = httpx.get(f"{self.url}/api/v1/query", params={"query": expr}, timeout=10)
        reply.raise_for_status()
        return reply.json()["data"]["result"]

    def value(self, expr: str) -> float | None:
        """The single value of a scalar-like query (a sum), None when it has no series."""
        result = self.query(expr)
        return float(result[0]["value"][1]) if result else None

    def names(self) -> set[str]:
        reply = httpx.get(f"{self.url}/api/v1/label/__name__/values", timeout=10)
        reply.raise_for_status()
        return set(reply.json()["data"])

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> PrometheusServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

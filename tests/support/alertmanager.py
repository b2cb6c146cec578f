"""A real Alertmanager (Debian `prometheus-alertmanager`) on a free loopback port, clustering
off, with a config the test gives; its data and log in a temporary directory removed on stop."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import httpx

from tests.support.ports import free_port
from tests.support.waiting import wait_for

BINARY = "prometheus-alertmanager"


class AlertmanagerServer:
    def __init__(self, config: str) -> None:
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.url = f"http://{self.address}"
        self.dir = Path(tempfile.mkdtemp(prefix="alertmanager-"))
        (self.dir / "alertmanager.yml").write_text(config)
        self.log = self.dir / "alertmanager.log"
        self.process: subprocess.Popen | None = None

    @staticmethod
    def available() -> bool:
        return shutil.which(BINARY) is not None

    def start(self) -> AlertmanagerServer:
        self.process = subprocess.Popen(
            [
                BINARY,
                f"--config.file={self.dir / 'alertmanager.yml'}",
                f"--storage.path={self.dir / 'data'}",
                f"--web.listen-address={self.address}",
                "--cluster.listen-address=",  # one instance: no gossip port
            ],
            stdout=self.log.open("w"),
            stderr=subprocess.STDOUT,
        )

        def ready() -> bool:
            if self.process.poll() is not None:
                raise RuntimeError(f"alertmanager exited: {self.output()}")
            try:
                return httpx.get(f"{self.url}/-/ready", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        wait_for(ready, 60, "alertmanager to be ready", interval=0.2)
        return self

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> AlertmanagerServer:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()

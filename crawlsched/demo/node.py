"""A local Selenium node for the demo: Debian's `chromedriver` on a free loopback port.

Started in its own process group so that stopping it also ends every Chrome it started.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import httpx


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class LocalChromedriver:
    """`with LocalChromedriver() as node: node.url` — or `start()` / `stop()` / `kill()`."""

    def __init__(self, binary: str | None = None, port: int | None = None) -> None:
        self.binary = binary or shutil.which("chromedriver")
        self.port = port or free_port()
        self.process: subprocess.Popen | None = None
        # Chrome keeps its singleton socket in a folder of $TMPDIR and leaves it behind when it
        # is killed (as a node's browsers are, at the end): give it a folder we remove.
        self.tmp_dir: str | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @classmethod
    def available(cls) -> bool:
        return shutil.which("chromedriver") is not None

    def start(self, ready_within_s: float = 30) -> LocalChromedriver:
        if self.binary is None:
            raise RuntimeError("chromedriver is not installed (Debian: chromium chromium-driver)")
        self.tmp_dir = tempfile.mkdtemp(prefix="crawlsched-chrome-")
        self.process = subprocess.Popen(
            [self.binary, f"--port={self.port}", "--allowed-ips=127.0.0.1"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            env={**os.environ, "TMPDIR": self.tmp_dir},
        )
        deadline = time.monotonic() + ready_within_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"chromedriver exited at start with {self.process.returncode}")
            try:
                if httpx.get(f"{self.url}/status", timeout=1).json()["value"]["ready"]:
                    return self
            except (httpx.HTTPError, ValueError, KeyError):
                pass
            time.sleep(0.1)
        self.kill()
        raise RuntimeError(f"chromedriver on port {self.port} not ready in {ready_within_s}s")

    def _signal_group(self, sig: int) -> None:
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, sig)

    def kill(self) -> None:
        """SIGKILL chromedriver and every browser it started, as a crashed node would go."""
        self._signal_group(signal.SIGKILL)
        if self.process is not None:
            self.process.wait(timeout=10)
        self._remove_tmp()

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            self._signal_group(signal.SIGKILL)  # browsers it left behind
            self._remove_tmp()
            return
        self._signal_group(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=10)
        self._signal_group(signal.SIGKILL)
        self._remove_tmp()

    def _remove_tmp(self) -> None:
        if self.tmp_dir is not None:
            shutil.rmtree(self.tmp_dir, ignore_errors=True)
            self.tmp_dir = None

    def live_processes(self) -> list[int]:
        """Pids of its process group (chromedriver and its Chromes) still running (Linux /proc).

        Zombies are left out: they are dead, only not yet reaped by their new parent.
        """
        if self.process is None:
            return []
        pids = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue  # ended while we looked
            state, pgid = fields[0], int(fields[2])
            if pgid == self.process.pid and state != "Z":
                pids.append(int(stat.parent.name))
        return pids

    def __enter__(self) -> LocalChromedriver:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

"""bench_cli: what the command line costs to start, and what uploads it may not send cost a
server, against a `crawlsched standalone` of its own (a fresh data directory, a free port).

(1) Start-up: the best and the median of N runs (default 9) of each, every one a process:
      base      python -c pass                 (the interpreter's own start)
      version   crawlsched --version
      run_list  crawlsched run list            (through the standalone: its API, over HTTP)
    `version_ratio`, `run_list_ratio` = each ÷ base, best and median.
(2) Uploads by a read token: U clients (default 16) each send a `POST /v1/imports` of S MB
    (default 64, the default CRAWLSCHED_API_MAX_UPLOAD_BYTES) at once, on raw sockets, with a
    read token. `read_upload_growth_mb` = the server's peak VmRSS (`/proc/<pid>/status`, read
    every 5 ms) over its VmRSS before them (target ≤ 50: each is 403 before it is read).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

BIN = Path(sys.executable).parent
CLI = str(BIN / "crawlsched")


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def timed(args: list[str], env: dict[str, str], runs: int) -> tuple[float, float]:
    seconds = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(args, env=env, capture_output=True, check=True)
        seconds.append(time.perf_counter() - started)
    return min(seconds), statistics.median(seconds)


def upload(url: str, token: str, size: int, answers: list[str]) -> None:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=300) as sock:
        sock.sendall(
            f"POST /v1/imports?format=csv HTTP/1.1\r\nHost: {host}\r\n"
            f"Authorization: Bearer {token}\r\nContent-Length: {size}\r\n\r\n".encode()
        )
        block = b"x" * (1024 * 1024)
        try:
            for _ in range(size // len(block)):
                sock.sendall(block)
            answers.append(sock.recv(200).decode(errors="replace").split("\r\n")[0])
        except OSError:
            answers.append("closed by the server")


def growth_under_uploads(pid: int, url: str, token: str, clients: int, size: int):
    start = peak = rss_bytes(pid)
    answers: list[str] = []
    senders = [
        threading.Thread(target=upload, args=(url, token, size, answers)) for _ in range(clients)
    ]
    for sender in senders:
        sender.start()
    while any(sender.is_alive() for sender in senders):
        peak = max(peak, rss_bytes(pid))
        time.sleep(0.005)
    return (peak - start) / 2**20, sorted(set(answers))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--uploads", type=int, default=16)
    parser.add_argument("--upload-mb", type=int, default=64)
    args = parser.parse_args()
    data = Path(tempfile.mkdtemp(prefix="bench-cli-")) / "data"
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRAWLSCHED_")}
    env.update(
        CRAWLSCHED_DATA_DIR=str(data),
        CRAWLSCHED_API_PORT="0",
        CRAWLSCHED_LOG_LEVEL="WARNING",
        CRAWLSCHED_CLOCK_INTERVAL_S="60",
    )
    server = subprocess.Popen(
        [CLI, "standalone"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    try:
        while not (data / "api.json").exists():
            time.sleep(0.1)
        api = json.loads((data / "api.json").read_text())
        base = timed([sys.executable, "-c", "pass"], env, args.runs)
        version = timed([CLI, "--version"], env, args.runs)
        run_list = timed([CLI, "run", "list"], env, args.runs)
        token = json.loads(
            subprocess.run(
                [CLI, "tokens", "create", "--role", "read", "--name", "bench", "--json"],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            ).stdout
        )["token"]
        growth, answers = growth_under_uploads(
            server.pid, api["url"], token, args.uploads, args.upload_mb * 2**20
        )
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=120)
    figures = {
        "base_ms": [round(t * 1000) for t in base],
        "version_ratio": [round(v / b, 1) for v, b in zip(version, base, strict=True)],
        "run_list_ratio": [round(r / b, 1) for r, b in zip(run_list, base, strict=True)],
        "read_upload_growth_mb": round(growth, 1),
        "read_upload_answers": answers,
    }
    print(f"{'':24}{'best':>8}{'median':>8}")
    for name, (best, median) in (("python -c pass", base), ("--version", version),
                                 ("run list", run_list)):  # fmt: skip
        print(f"{name:24}{best * 1000:>6.0f}ms{median * 1000:>6.0f}ms")
    print(f"{args.uploads} read-token uploads of {args.upload_mb} MB: +{growth:.1f} MB, {answers}")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()

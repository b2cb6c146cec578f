"""The README's standalone walk-through, run as written: its environment block (with a data
directory of the test's own and free ports as the values of the variables it sets), the demo
sites and the standalone server in the background, then every command of terminal 3 in order
(in a folder of the test's own, where `.venv` is the checkout's: the items file is written
there), checking what its comments say the output shows."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import httpx

from tests.support.ports import free_ports
from tests.support.readme_blocks import blocks, lines, with_values
from tests.support.scratch import scratch_file
from tests.support.waiting import wait_for
from tests.support.workers import REPO

README = REPO / "README.md"


def _environment(block: str) -> dict[str, str]:
    """What the environment block exports, run by bash in a clean environment."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("CRAWLSCHED_")}
    done = subprocess.run(
        ["bash", "-ec", f"{block}\nenv -0"], env=clean, capture_output=True, check=True
    )
    pairs = (item.split("=", 1) for item in done.stdout.decode().split("\0") if "=" in item)
    return dict(pairs)


def _background(command: str, env: dict[str, str]) -> tuple[subprocess.Popen, object]:
    log = scratch_file("walkthrough-", ".log")
    process = subprocess.Popen(
        ["bash", "-c", f"exec {command}"],
        cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    return process, log


def _serving(url: str, process: subprocess.Popen, log) -> bool:
    if process.poll() is not None:
        raise AssertionError(f"exited {process.returncode}: {Path(log.name).read_text()[-2000:]}")
    try:
        return httpx.get(url, timeout=5).status_code < 500
    except httpx.HTTPError:
        return False


def _run(command: str, env: dict[str, str], cwd: Path = REPO) -> subprocess.CompletedProcess:
    done = subprocess.run(
        ["bash", "-c", f"set -o pipefail; {command}"],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, f"{command}: exit {done.returncode}\n{done.stderr}"
    return done


def test_the_readme_walkthrough_crawls_the_local_site_as_written(tmp_path: Path):
    found = blocks(README)
    assert set(found) == {"environment", "terminal 1", "terminal 2", "terminal 3"}
    api_port, network_port, news_port = free_ports(3)
    data_dir = tmp_path / "crawl-try"
    env = _environment(
        with_values(
            found["environment"],
            {
                "CRAWLSCHED_DATA_DIR": str(data_dir),
                "CRAWLSCHED_API_PORT": str(api_port),
                "NETWORK_PORT": str(network_port),
                "NEWS_PORT": str(news_port),
            },
        )
    )
    assert not data_dir.exists()  # an empty data directory: the server makes it
    started = []
    try:
        [sites] = lines(found["terminal 1"])
        process, log = _background(sites.command, env)
        started.append(process)
        news = f"http://127.0.0.1:{news_port}/news"
        wait_for(lambda: _serving(news, process, log), 60, "the demo sites")
        [server] = lines(found["terminal 2"])
        process, log = _background(server.command, env)
        started.append(process)
        health = f"http://127.0.0.1:{api_port}/health"
        wait_for(lambda: _serving(health, process, log), 90, "the standalone server")
        here = tmp_path / "terminal-3"
        here.mkdir()
        (here / ".venv").symlink_to(REPO / ".venv")
        checked = 0
        for line in lines(found["terminal 3"]):
            if line.repeat_until is not None:
                deadline = time.monotonic() + 180
                while line.repeat_until not in (out := _run(line.command, env, here).stdout):
                    assert time.monotonic() < deadline, f"{line.command}: never showed\n{out}"
                    time.sleep(1)
                checked += 1
            else:
                out = _run(line.command, env, here).stdout
            if line.prints is not None:
                assert out.strip() == line.prints, f"{line.command}: printed {out!r}"
                checked += 1
            if line.shows is not None:
                assert line.shows in out, f"{line.command}: showed {out!r}"
                checked += 1
        assert checked == 2  # the stored pages counted; the run succeeded
        # What the README says of the crawl: its summary, and the run the server kept.
        first = _run(lines(found["terminal 3"])[0].command, env, here).stdout
        said = " ".join(first.split())
        assert ": succeeded" in said and "pages: 6 ended (6 succeeded)" in said
        api = json.loads((data_dir / "api.json").read_text())
        runs = httpx.get(
            f"{api['url']}/v1/runs",
            headers={"Authorization": f"Bearer {api['token']}"},
            timeout=30,
        ).json()["items"]
        crawls = [r for r in runs if r["_id"].startswith("crawl-")]
        assert [(r["planned"], r["discovered"], r["counts"]) for r in crawls] == [
            (1, 5, {"succeeded": 6})
        ] * 2  # (the crawl ran again just above: the same site, the same bounds)
    finally:
        codes = _stop(started)
    # Ctrl-C stops both cleanly.
    assert codes == [0, 0]


def _stop(started: list[subprocess.Popen]) -> list[int | None]:
    """Ctrl-C to each (the server first), then SIGKILL to any still running after two
    minutes; their exit codes (None: killed)."""
    for process in reversed(started):
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGINT)
    codes: list[int | None] = []
    for process in started:
        try:
            codes.append(process.wait(timeout=120))
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)
            codes.append(None)
    return codes

"""`crawlsched demo serve-sites`: the demo's two sites on the ports asked for, until SIGINT."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
from pathlib import Path

import httpx

from tests.support.ports import free_ports
from tests.support.scratch import scratch_file
from tests.support.standalone import CLI, standalone_env
from tests.support.waiting import wait_for
from tests.support.workers import REPO


def _get(url: str) -> httpx.Response | None:
    try:
        return httpx.get(url, timeout=5)
    except httpx.HTTPError:
        return None


def _refused(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) != 0


def test_serve_sites_serves_both_sites_until_interrupted(tmp_path):
    network_port, news_port = free_ports(2)
    log = scratch_file("serve-sites-", ".log")
    process = subprocess.Popen(
        [CLI, "demo", "serve-sites", "--network-port", str(network_port),
         "--news-port", str(news_port)],
        cwd=REPO, env=standalone_env(tmp_path / "data"), stdout=log, stderr=subprocess.STDOUT,
        start_new_session=True,
    )  # fmt: skip
    try:

        def news_or_exit() -> httpx.Response | None:
            assert process.poll() is None, Path(log.name).read_text()  # say why, at once
            return _get(f"http://127.0.0.1:{news_port}/news")

        news = wait_for(news_or_exit, 60, "the news site")
        assert news.status_code == 200
        assert "news page 1" in news.text and 'rel="next"' in news.text
        article = _get(f"http://127.0.0.1:{news_port}/news/a/0")
        assert article.status_code == 200 and "News story 0" in article.text
        home = _get(f"http://127.0.0.1:{network_port}/")
        assert home.status_code == 200 and "/u/twitter_user0" in home.text
        profile = _get(f"http://127.0.0.1:{network_port}/u/twitter_user0")
        assert profile.status_code == 200
        # Followers need a login, as in the demo.
        assert _get(f"http://127.0.0.1:{network_port}/u/twitter_user0/followers").status_code == 401
    finally:
        os.killpg(process.pid, signal.SIGINT)
        code = process.wait(timeout=60)
    printed = Path(log.name).read_text()
    assert code == 0, printed
    assert f"http://127.0.0.1:{news_port}/news" in printed
    assert f"http://127.0.0.1:{network_port}/" in printed
    assert _refused(news_port) and _refused(network_port)


def test_serve_sites_refuses_a_taken_port(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        (free,) = free_ports(1)
        result = subprocess.run(
            [CLI, "demo", "serve-sites", "--network-port", str(free), "--news-port", str(busy)],
            cwd=REPO, env=standalone_env(tmp_path / "data"), capture_output=True, text=True,
            timeout=60, check=False,
        )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("error: --news-port") and len(result.stderr.splitlines()) == 1
    assert _refused(free)  # the other site was not left serving


def test_serve_sites_refuses_one_port_for_both(tmp_path):
    (port,) = free_ports(1)
    result = subprocess.run(
        [CLI, "demo", "serve-sites", "--network-port", str(port), "--news-port", str(port)],
        cwd=REPO, env=standalone_env(tmp_path / "data"), capture_output=True, text=True,
        timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 2
    assert "must differ" in result.stderr

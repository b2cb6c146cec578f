"""On a terminal, a command through a server prints what it prints without one: the same bytes
at the terminal's width (200 columns here, not the 80 of piped output) and in colour. Judged on
a pseudo-terminal, with `crawlsched api serve` and the command line each a process of its own,
over one MongoDB database (the multi-process test server)."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import struct
import subprocess
import termios
from pathlib import Path

import pytest

from tests.support.standalone import CLI
from tests.support.workers import REPO, crawlsched_env
from tests.test_api_serve import api_serve

COLUMNS = 200
ANSI = re.compile(rb"\x1b\[[0-9;]*m")
COMMANDS = [
    ["schedules", "list"],
    ["jobs", "list", "websites"],
    ["hosts", "list"],
    ["media", "list"],
    ["jobs", "summary"],
    ["schedules", "next", "--limit", "5"],
]


def on_terminal(args: list[str], env: dict[str, str]) -> bytes:
    """What `crawlsched ARGS` writes to a terminal COLUMNS wide."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 50, COLUMNS, 0, 0))
    clean = {k: v for k, v in env.items() if k not in ("COLUMNS", "LINES", "NO_COLOR")}
    process = subprocess.Popen(
        [CLI, *args],
        cwd=REPO,
        env={**clean, "TERM": "xterm-256color"},
        stdin=follower,
        stdout=follower,
        stderr=follower,
        close_fds=True,
    )
    os.close(follower)
    out = b""
    try:
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the terminal closed: the process ended
                break
            if not chunk:
                break
            out += chunk
    finally:
        os.close(leader)
        assert process.wait(timeout=120) == 0, out.decode(errors="replace")
    return out


def run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [CLI, *args], cwd=REPO, env=env, capture_output=True, text=True, check=True, timeout=120
    )


@pytest.mark.multiprocess
def test_through_a_server_a_terminal_gets_its_width_and_colour(
    multiprocess_mongo_url: str, mongo_database_name: str, tmp_path: Path
):
    # Given a MongoDB database with reference data, jobs, schedules and a host
    env = crawlsched_env("stub://", multiprocess_mongo_url, mongo_database_name)
    env["CRAWLSCHED_DATA_DIR"] = str(tmp_path / "no-server-here")
    run(["init-db"], env)
    run(["jobs", "add", "website", "https://www.example.org/news", "--depth", "2"], env)
    run(["jobs", "add", "profile", "twitter", "alice"], env)
    run(["schedules", "add", "nightly-news-sites", "--cron", "30 2 * * 1-5", "--tz",
         "Europe/Paris", "--collection", "websites"], env)  # fmt: skip
    run(["hosts", "set", "https://www.example.org", "--delay", "3", "--new"], env)
    token = json.loads(run(["tokens", "create", "--name", "t", "--json"], env).stdout)["token"]

    with api_serve(env) as url:
        through = {
            **{k: v for k, v in env.items() if k != "CRAWLSCHED_MONGO_URL"},
            "CRAWLSCHED_API_URL": url,
            "CRAWLSCHED_API_TOKEN": token,
        }
        for args in COMMANDS:
            # When the command runs on the store itself, and through the server
            here = on_terminal(args, env)
            there = on_terminal(args, through)
            # Then the terminal gets the same bytes: its width and colour, either way
            assert there == here, args
            plain = ANSI.sub(b"", there).decode()
            assert ANSI.search(there), f"{args}: no colour"
            if args[:2] in (["schedules", "list"], ["media", "list"]):
                assert max(len(line) for line in plain.splitlines()) > 80, plain

"""Heartbeat files and the probes' verdicts (crawlsched/liveness.py): a beat of a running
process counts, one left by a process that is gone (or whose pid another now holds) never
does; live needs a fresh beat from every running process, ready also that each takes work."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from hypothesis import given
from hypothesis import strategies as st

from crawlsched.liveness import Beat, HeartbeatFile, beats_of_live_processes, start_token, verdict

STALE_S = 30.0


def test_a_running_process_beat_is_read_back(tmp_path):
    base = tmp_path / "hb" / "heartbeat"
    HeartbeatFile(base).beat(taking_work=True, now=1000.0)
    (beat,) = beats_of_live_processes(base)
    assert (beat.pid, beat.at, beat.taking_work) == (os.getpid(), 1000.0, True)
    assert beat.token == start_token(os.getpid()) is not None


def test_a_beat_of_a_process_gone_or_replaced_is_ignored(tmp_path):
    base = tmp_path / "heartbeat"
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    HeartbeatFile(base, pid=int(gone.stdout)).beat(taking_work=True)
    # This process's pid, but another process's start token: a pid reused after a restart
    (tmp_path / f"heartbeat.{os.getpid()}").write_text(
        json.dumps({"pid": os.getpid(), "at": 1.0, "taking_work": True, "token": "0"})
    )
    # A file that names another pid than its own name, and one that is not JSON
    (tmp_path / "heartbeat.1").write_text(json.dumps({"pid": 2, "at": 1.0, "taking_work": True}))
    (tmp_path / "heartbeat.3").write_text("{")
    assert beats_of_live_processes(base) == []


beats = st.lists(
    st.builds(Beat, st.integers(1, 10**6), st.floats(0, 2000), st.booleans(), st.none()),
    max_size=6,
)


@given(beats, st.floats(0, 2000))
def test_live_needs_every_running_process_fresh_and_ready_also_taking_work(beats, now):
    live = verdict(beats, now, STALE_S, ready=False)
    ready = verdict(beats, now, STALE_S, ready=True)
    fresh = bool(beats) and all(now - b.at <= STALE_S for b in beats)
    assert (live is None) == fresh
    assert (ready is None) == (fresh and all(b.taking_work for b in beats))

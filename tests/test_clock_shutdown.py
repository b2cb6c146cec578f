"""`crawlsched clock` stops gracefully on SIGTERM: no traceback, exit 0, its last line logged."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.support.waiting import wait_for


def test_clock_stops_cleanly_on_sigterm():
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRAWLSCHED_")}
    env.update(CRAWLSCHED_BROKER_URL="stub://", CRAWLSCHED_LOG_FORMAT="json")
    cli = str(Path(sys.executable).parent / "crawlsched")
    with tempfile.TemporaryFile() as out:
        clock = subprocess.Popen(
            [cli, "clock", "--interval", "0.1"], env=env, stdout=out, stderr=subprocess.STDOUT
        )
        try:

            def output() -> str:
                out.seek(0)
                return out.read().decode(errors="replace")

            wait_for(lambda: "clock_started" in output(), 60, "the clock to start")
            clock.send_signal(signal.SIGTERM)
            assert clock.wait(timeout=30) == 0, output()
        finally:
            if clock.poll() is None:
                clock.kill()
        text = output()
    assert "clock_stopped" in text and "Traceback" not in text, text
    # No line per tick: started and stopped (a heartbeat comes once a minute)
    events = [json.loads(line)["event"] for line in text.splitlines() if line.startswith("{")]
    assert events == ["clock_started", "clock_stopped"], text

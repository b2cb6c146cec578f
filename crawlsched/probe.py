"""`python -m crawlsched.probe live|ready`: a Kubernetes exec probe (or compose healthcheck)
for a `dramatiq` worker or `crawlsched clock`, read from their heartbeat files
(`CRAWLSCHED_WORKER_HEARTBEAT_FILE`, see `crawlsched/liveness.py`).

Exit 0: the probe passes; 1: it fails, with the reason on one line; 2: bad use (no
heartbeat file set). Cheap on purpose: it reads only the environment and a few small files.
"""

from __future__ import annotations

import sys
import time

from crawlsched.liveness import beats_of_live_processes, verdict

STALE_BEATS = 6  # heartbeats a process may miss before it is called stale


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or argv[0] not in ("live", "ready"):
        print("usage: python -m crawlsched.probe live|ready", file=sys.stderr)
        return 2
    from crawlsched.settings import load_settings_or_exit

    settings = load_settings_or_exit()
    base = settings.worker_heartbeat_file
    if base is None:
        print("error: CRAWLSCHED_WORKER_HEARTBEAT_FILE is not set", file=sys.stderr)
        return 2
    stale_after_s = STALE_BEATS * settings.worker_heartbeat_s
    why = verdict(beats_of_live_processes(base), time.time(), stale_after_s, argv[0] == "ready")
    if why is not None:
        print(f"{argv[0]}: {why}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

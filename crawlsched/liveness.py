"""Heartbeat files: how a process shows a Kubernetes probe (or compose's healthcheck) that it
is alive and taking work, without a port of its own.

Each process writes `<path>.<pid>`: the moment it last beat, whether it takes work now, and
its start token (`/proc/<pid>/stat`'s start time). The probe (`python -m crawlsched.probe`)
reads every file of a live process whose start token still matches: a file left by a process
that died, in an emptyDir that outlives a container, or whose pid a new process reuses, is
not that process's and is ignored.

- live: at least one such file, and none older than `stale_after_s`;
- ready: live, and every one of them takes work (a draining worker does not).

A `dramatiq` worker process beats from a thread of its own while its consumer and worker
threads are alive (`brokers/drain.py`); the clock beats as it sends ticks.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path


def start_token(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (field 22 of /proc/<pid>/stat):
    with the pid, names one process for good. None: no such process, or no /proc."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may hold spaces: split after it.
    fields = stat.rpartition(")")[2].split()
    return fields[19] if len(fields) > 19 else None


@dataclass(frozen=True)
class Beat:
    pid: int
    at: float  # wall-clock seconds
    taking_work: bool
    token: str | None


class HeartbeatFile:
    """One process's heartbeat at `<base>.<pid>` (written whole: a temp file renamed)."""

    def __init__(self, base: Path, pid: int | None = None) -> None:
        self.pid = pid or os.getpid()
        self.path = Path(f"{base}.{self.pid}")
        self.token = start_token(self.pid)

    def beat(self, taking_work: bool, now: float | None = None) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        body = {
            "pid": self.pid,
            "at": time.time() if now is None else now,
            "taking_work": taking_work,
            "token": self.token,
        }
        temporary = self.path.with_name(f".{self.path.name}.tmp")
        temporary.write_text(json.dumps(body))
        temporary.replace(self.path)

    def remove(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


def beats_of_live_processes(base: Path) -> list[Beat]:
    """The heartbeats of processes still running (as their start token says)."""
    beats = []
    for path in sorted(base.parent.glob(f"{base.name}.*")):
        try:
            body = json.loads(path.read_text())
            beat = Beat(int(body["pid"]), float(body["at"]), bool(body["taking_work"]),
                        body.get("token"))  # fmt: skip
        except (OSError, ValueError, KeyError, TypeError):
            continue  # being replaced, or not ours
        if path.name != f"{base.name}.{beat.pid}":
            continue
        if beat.token is not None and start_token(beat.pid) != beat.token:
            continue  # that process is gone (or its pid is another's now)
        if beat.token is None and not _running(beat.pid):
            continue  # (no /proc where it was written: the pid alone)
        beats.append(beat)
    return beats


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's
    return True


def verdict(beats: list[Beat], now: float, stale_after_s: float, ready: bool) -> str | None:
    """Why the probe fails, or None when it passes."""
    if not beats:
        return "no heartbeat of a running process"
    stale = [b.pid for b in beats if now - b.at > stale_after_s]
    if stale:
        return f"no heartbeat for over {stale_after_s:g} s from pid {stale}"
    if ready and not all(b.taking_work for b in beats):
        return f"not taking work: pid {[b.pid for b in beats if not b.taking_work]}"
    return None

"""The prometheus-client multiprocess directory of one worker group, cleared when it starts.

Every process of a `dramatiq` group writes its counters to files in this directory and the
group's exporter sums them. Files left by an earlier group would be summed too (counts
"resurrected" after a restart), so the first process of a new group clears the directory. A
group is named by its parent: every worker process of one `dramatiq` command, and its
exporter, share the parent's pid, and a restart has a new one. A lock keeps two processes of
the same group from both clearing.
"""

from __future__ import annotations

import fcntl
import os
import sys
from pathlib import Path

MARKER = ".group"
ENV = "PROMETHEUS_MULTIPROC_DIR"


def prepare(directory: Path, group: str) -> bool:
    """Make `directory` this group's; returns True when it cleared an earlier group's files."""
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / ".lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        marker = directory / MARKER
        if marker.exists() and marker.read_text() == group:
            return False
        for db_file in directory.glob("*.db"):
            db_file.unlink(missing_ok=True)
        marker.write_text(group)
        return True


def use(directory: Path) -> None:
    """Point prometheus-client at `directory`. It reads the variable once, when first imported:
    a process that imported it earlier would count into memory nobody serves, so refuse."""
    values = sys.modules.get("prometheus_client.values")
    if values is not None and values.ValueClass is values.MutexValue:
        raise RuntimeError(
            "prometheus_client was imported before its multiprocess directory was set; "
            "metrics of this process would be lost"
        )
    os.environ[ENV] = str(directory)


def group_of_this_process() -> str:
    return str(os.getppid())

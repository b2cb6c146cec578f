"""Where a running standalone server answers: `api.json` in its data directory, read by the
command line of the same machine (so this module stays light: no store, no broker)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

API_FILE = "api.json"


def read_api(root: Path) -> dict[str, Any] | None:
    """The running server's {"url", "token", "pid"}, if its file is there."""
    try:
        found = json.loads((root / API_FILE).read_text())
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def pid_alive(pid: object) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def running_server(root: Path) -> dict[str, Any] | None:
    """The address of the server running for this data directory, or None."""
    found = read_api(root)
    return found if found and pid_alive(found.get("pid")) else None

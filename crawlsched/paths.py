"""Where crawlsched keeps things on this machine by default (light: the command line reads it
before, or instead of, the whole settings)."""

from __future__ import annotations

import os
from pathlib import Path


def default_data_dir() -> Path:
    """$XDG_DATA_HOME/crawlsched, or ~/.local/share/crawlsched."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "crawlsched"

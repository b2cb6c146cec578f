"""One temporary folder for everything the test session's helpers write (worker logs, metrics
folders, Grid configs), removed when the session ends well.

A failing session keeps it, and says where, so the workers' output can still be read.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

_root: Path | None = None


def session_root() -> Path:
    global _root
    if _root is None:
        _root = Path(tempfile.mkdtemp(prefix="crawlsched-tests-"))
    return _root


def scratch_dir(prefix: str) -> Path:
    """A new folder under the session's root."""
    return Path(tempfile.mkdtemp(prefix=prefix, dir=session_root()))


def scratch_file(prefix: str, suffix: str = ""):
    """A new open file under the session's root (binary, write mode), kept until cleanup."""
    return tempfile.NamedTemporaryFile(
        prefix=prefix, suffix=suffix, dir=session_root(), delete=False
    )


def cleanup(keep: bool) -> str | None:
    """Remove the session's folder, or keep it and return where it is."""
    global _root
    if _root is None:
        return None
    if keep:
        return str(_root)
    shutil.rmtree(_root, ignore_errors=True)
    _root = None
    return None

"""The standalone data directory is its owner's only: every folder 0700 and every file 0600
(snapshots, the messages and clean mark of a stop, api.json, secret.key, the lock), even under
a umask that would let everyone read, and a directory found looser is tightened. Judged by the
modes on disk."""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from crawlsched.standalone.datadir import DataDir
from tests.support.standalone import Standalone, standalone_env


@contextlib.contextmanager
def _umask(mask: int) -> Iterator[None]:
    before = os.umask(mask)
    try:
        yield
    finally:
        os.umask(before)


def _loose(root: Path) -> list[str]:
    """Every path under root (and root) whose mode lets anyone but its owner in. A running
    server renames its partial snapshot files and drops old snapshots while this walks: what
    vanishes is skipped (os.walk ignores a folder gone before it is listed)."""
    found = []
    paths = [root]
    for folder, dirs, files in os.walk(root):
        paths += [Path(folder, name) for name in [*dirs, *files]]
    for path in paths:
        try:
            mode = path.lstat().st_mode
        except FileNotFoundError:
            continue
        if stat.S_ISLNK(mode):
            continue
        wanted = 0o700 if stat.S_ISDIR(mode) else 0o600
        if stat.S_IMODE(mode) != wanted:
            found.append(f"{path.relative_to(root)}: {oct(stat.S_IMODE(mode))}")
    return found


def test_a_standalone_server_writes_nothing_anyone_else_can_read(tmp_path):
    data = tmp_path / "data"
    env = standalone_env(data)
    del env["CRAWLSCHED_SECRET_KEY"]  # the server makes secret.key
    with _umask(0), Standalone(env) as server:  # the server inherits the umask
        server.cli("schedules", "add", "nightly", "--cron", "0 3 * * *", "--collection", "websites")
        running = {p.name for p in data.iterdir()}
        assert {"api.json", "secret.key", "lock", "snapshots", "current"} <= running
        assert _loose(data) == []
        assert server.stop() == 0
    assert any(data.glob("snapshots/*/CLEAN"))
    assert _loose(data) == []


def test_a_looser_data_directory_is_tightened_when_opened(tmp_path):
    root = tmp_path / "data"
    (root / "snapshots" / "000001" / "crawlsched").mkdir(parents=True)
    (root / "snapshots" / "000001" / "crawlsched" / "jobs.bson").write_bytes(b"")
    (root / "secret.key").write_text("k")
    for path in [root, *root.rglob("*")]:
        path.chmod(0o777 if path.is_dir() else 0o644)
    DataDir(root, "crawlsched")
    assert _loose(root) == []

"""The journal of the writes since the last snapshot, beside the snapshots (as Redis's
append-only file beside its RDB snapshots).

    <data dir>/journal/000042.log      the writes applied after snapshot 42 was cut

Every write to the embedded store becomes one record as it is applied
(`store/embedded/effects.py`), appended here with one `write(2)` while the store's lock is
still held: the file holds the writes in the order they were applied, and a record is in the
OS's hands before the next write starts, so a `kill -9` loses none of them. `sync()` makes
what was appended durable against a power loss too (fdatasync): a thread calls it every
`journal_fsync_ms`, and the API calls it before answering a write. Syncs are shared: one
fsync covers every record appended before it began, whoever asked.

A snapshot starts a new file under the same lock as its encoding (`rotate`), so snapshot N
holds exactly what the files numbered below N hold; once N is `current`, those files are
deleted. On start, the files numbered N and above are replayed onto snapshot N
(`journal_replay.py`).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from crawlsched.standalone.journal_format import MAGIC, frame

SUFFIX = ".log"
DIR_MODE = 0o700
FILE_MODE = 0o600


def journal_path(folder: Path, number: int) -> Path:
    return folder / f"{number:06d}{SUFFIX}"


def journal_numbers(folder: Path) -> list[int]:
    """The numbers of the journal files in `folder`, in order."""
    if not folder.is_dir():
        return []
    return sorted(int(p.stem) for p in folder.iterdir() if p.suffix == SUFFIX and p.stem.isdigit())


def remove_journals_before(folder: Path, number: int) -> None:
    """Delete the files a snapshot numbered `number` holds."""
    for old in journal_numbers(folder):
        if old < number:
            journal_path(folder, old).unlink(missing_ok=True)


class JournalWriter:
    """Appends framed records to the current journal file.

    `_lock` guards `_fd`, `_size` (bytes in the current file), `_retired` (files rotated
    away and not yet synced), `_appended` (bytes appended over all files), `_new_files` and
    `_failed`; `_sync_lock` serialises syncs and guards `_synced` (bytes durable)."""

    def __init__(self, folder: Path, number: int) -> None:
        folder.mkdir(exist_ok=True, mode=DIR_MODE)
        os.chmod(folder, DIR_MODE)
        self.folder = folder
        self._lock = threading.Lock()
        self._sync_lock = threading.Lock()
        self._fd = -1
        self._size = 0
        self._retired: list[int] = []
        self._appended = 0
        self._new_files = False
        self._failed: OSError | None = None
        self._synced = 0
        self.number = number
        self._fd, self._size = self._open(number)
        self._new_files = True  # its name in the folder is made durable by the first sync

    def _open(self, number: int) -> tuple[int, int]:
        path = journal_path(self.folder, number)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, FILE_MODE)
        _write_all(fd, MAGIC)
        return fd, len(MAGIC)

    def append(self, payload: bytes) -> None:
        """Append one record (the store's lock is held: records leave in the order applied).

        A write that fails (a full disk) is cut off again, so the file never holds half a
        record, and the error goes to the writer. Every later append fails too until the
        next snapshot starts a new file: a record after a missing one would be replayed onto
        a store that never held what the missing one wrote. The snapshot holds the store as
        it is in memory, the missing write included."""
        data = frame(payload)
        with self._lock:
            if self._failed is not None:
                raise OSError(f"the journal lost a write ({self._failed}); waiting for a snapshot")
            try:
                _write_all(self._fd, data)
            except OSError as e:
                self._failed = e
                os.ftruncate(self._fd, self._size)
                raise
            self._size += len(data)
            self._appended += len(data)

    def rotate(self, number: int) -> None:
        """Later records go to a new file, `number` (under the store's lock, with the
        snapshot's encoding: the files below `number` hold what the snapshot holds)."""
        fd, size = self._open(number)
        with self._lock:
            self._retired.append(self._fd)
            self._fd, self._size, self.number = fd, size, number
            self._new_files = True
            self._failed = None

    def sync(self) -> None:
        """Return once every record appended before the call is on disk."""
        with self._lock:
            wanted = self._appended
        with self._sync_lock:
            with self._lock:
                if self._synced >= wanted and not self._new_files and not self._retired:
                    return
                fd, retired, self._retired = self._fd, self._retired, []
                upto, new_files, self._new_files = self._appended, self._new_files, False
            for old in retired:  # older records first: a later file is never ahead of them
                os.fsync(old)
                os.close(old)
            os.fdatasync(fd)
            if new_files:
                _fsync_dir(self.folder)
            self._synced = upto

    @property
    def appended_bytes(self) -> int:
        return self._appended

    def close(self) -> None:
        if self._fd < 0:
            return
        self.sync()
        with self._sync_lock, self._lock:
            os.close(self._fd)
            self._fd = -1


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)

"""The standalone server's data directory: snapshots of the embedded store in MongoDB's dump
format, switched atomically, plus the API address and a local admin token.

    <data dir>/
      current -> snapshots/000042      the latest complete snapshot (a symbolic link)
      snapshots/000042/crawlsched/     mongodump layout: <collection>.bson and .metadata.json
      snapshots/000042/messages.json   messages not yet processed at a clean stop
      snapshots/000042/CLEAN           present when the server stopped cleanly
      journal/000042.log               every write applied since snapshot 42 (journal.py)
      api.json                         {"url": …, "token": …} while the server runs (mode 0600)
      secret.key                       encrypts account secrets, unless CRAWLSCHED_SECRET_KEY is set
      signing.key                      signs messages, unless CRAWLSCHED_MESSAGE_SIGNING_KEY is set

Everything in it is its owner's only: folders 0700, files 0600, whatever the umask, and a
directory found looser (made by hand, or by an older version) is tightened when a server
opens it.

A snapshot is written into a new folder, flushed, and only then made `current` by renaming a
link over the old one: a crash at any moment leaves the previous snapshot whole. Collections
that no write touched since the previous snapshot are hard links to its files, and in the
others only the documents written since are encoded again, so a snapshot costs what changed,
not the whole store. `mongorestore --dir <data dir>/current` loads it into
a real MongoDB.

Snapshots and journal files share one sequence of numbers: snapshot N holds what the journal
files below N held, and loading replays the files numbered N and above onto it.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import bson

from crawlsched.errors import CrawlschedError
from crawlsched.standalone.address import API_FILE, read_api
from crawlsched.standalone.journal import JournalWriter, journal_numbers, remove_journals_before
from crawlsched.standalone.journal_replay import replay_journals
from crawlsched.store import dump
from crawlsched.store.client import record_writes
from crawlsched.store.counting import CountingDatabase
from crawlsched.store.embedded.effects import WriteEffects

KEEP_SNAPSHOTS = 2
JOURNAL_DIR = "journal"
CLEAN_MARK = "CLEAN"
MESSAGES_FILE = "messages.json"
SECRET_KEY_FILE = "secret.key"
SIGNING_KEY_FILE = "signing.key"
LOCK_FILE = "lock"
DIR_MODE = 0o700
FILE_MODE = 0o600


class DataDirBusy(CrawlschedError):
    """Another server holds the data directory."""


@dataclass
class Snapshot:
    """One collection as last written: which mongomock store and write count it was read at."""

    store_id: int
    generation: int
    path: Path


@dataclass
class SnapshotStats:
    number: int
    written: list[str] = field(default_factory=list)
    linked: list[str] = field(default_factory=list)
    documents: int = 0


class DataDir:
    def __init__(self, root: Path, db_name: str) -> None:
        self.root = root
        self.db_name = db_name
        self.snapshots = root / "snapshots"
        self.current = root / "current"
        self.journal_dir = root / JOURNAL_DIR
        self.journal: JournalWriter | None = None
        self._last: dict[str, Snapshot] = {}
        # Per collection: the store object last encoded and each document's BSON then.
        self._encoded: dict[str, tuple[Any, dict[Any, bytes]]] = {}
        self.root.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
        self.snapshots.mkdir(exist_ok=True, mode=DIR_MODE)
        restrict(self.root)

    def acquire(self) -> None:
        """Hold the directory's lock for this process's life: one server per data directory
        (two would overwrite each other's snapshots)."""
        import fcntl

        fd = os.open(self.root / LOCK_FILE, os.O_WRONLY | os.O_CREAT | os.O_APPEND, FILE_MODE)
        self._lock_file = os.fdopen(fd, "a")
        try:
            fcntl.flock(self._lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            running = read_api(self.root) or {}
            raise DataDirBusy(
                f"another crawlsched standalone (pid {running.get('pid', '?')}) already uses "
                f"{self.root}; stop it first, or set CRAWLSCHED_DATA_DIR to another folder"
            ) from None

    # -- reading --------------------------------------------------------------------------

    def latest(self) -> Path | None:
        """The folder of the latest complete snapshot, or None before the first."""
        if not self.current.is_symlink() and not self.current.exists():
            return None
        target = self.current.resolve()
        return target if target.is_dir() else None

    def load_into(self, db: CountingDatabase) -> dict[str, Any]:
        """Load the latest snapshot into an empty database, then replay the journal written
        after it; what it held and how it ended (clean: a clean stop, and nothing written
        after its last snapshot)."""
        folder = self.latest()
        loaded = {} if folder is None else dump.load_dump(db, folder / self.db_name, drop=True)
        since = 0 if folder is None else int(folder.name)
        journal = replay_journals(db, self.journal_dir, since)
        messages = []
        messages_path = None if folder is None else folder / MESSAGES_FILE
        if messages_path is not None and messages_path.exists():
            messages = [
                (m["queue"], base64.b64decode(m["data"]))
                for m in json.loads(messages_path.read_text())
            ]
        clean = folder is None or (folder / CLEAN_MARK).exists()
        return {
            "loaded": loaded,
            "clean": clean and not journal.records,
            "messages": messages,
            "snapshot": None if folder is None else folder.name,
            "journal": journal.summary,
        }

    # -- the journal ------------------------------------------------------------------------

    def start_journal(self, db: CountingDatabase) -> SnapshotStats:
        """Journal every later write to `db`: a journal file is opened, then a snapshot of
        what the store holds now starts the next one (so a start that replayed a journal
        leaves one snapshot and an empty journal behind)."""
        self.journal = JournalWriter(self.journal_dir, self._next_number())
        record_writes(db, WriteEffects(self.journal.append))
        return self.snapshot(db)

    def close_journal(self, db: CountingDatabase) -> None:
        """Stop journaling (after the last snapshot of a clean stop), all of it on disk."""
        if self.journal is not None:
            record_writes(db, None)
            self.journal.close()
            self.journal = None

    # -- writing --------------------------------------------------------------------------

    def snapshot(
        self,
        db: CountingDatabase,
        messages: list[tuple[str, bytes]] | None = None,
        clean: bool = False,
    ) -> SnapshotStats:
        """Write the embedded database as a new snapshot and make it current.

        Every collection that changed is encoded under the store's lock in one pass, so the
        snapshot is one moment of the whole database; the files are written after."""
        number = self._next_number()
        folder = self.snapshots / f"{number:06d}"
        target = folder / self.db_name
        folder.mkdir(mode=DIR_MODE)
        target.mkdir(mode=DIR_MODE)
        stats = SnapshotStats(number)
        changed = self._cut(db, number, target)
        for name, (seen, encoded, indexes) in changed.items():
            if seen.path != target:  # unchanged: link the previous snapshot's files
                for suffix in (".bson", ".metadata.json"):
                    os.link(seen.path / f"{name}{suffix}", target / f"{name}{suffix}")
                stats.linked.append(name)
            else:
                dump.write_collection(target, name, encoded, indexes, FILE_MODE)
                stats.written.append(name)
                stats.documents += len(encoded)
            self._last[name] = Snapshot(seen.store_id, seen.generation, target)
        self._last = {n: s for n, s in self._last.items() if n in changed}
        self._encoded = {n: e for n, e in self._encoded.items() if n in changed}
        if messages:
            payload = [{"queue": q, "data": base64.b64encode(d).decode()} for q, d in messages]
            dump.write_file(folder / MESSAGES_FILE, [json.dumps(payload).encode()], FILE_MODE)
        if clean:
            dump.write_file(folder / CLEAN_MARK, [b""], FILE_MODE)
        _fsync_dir(target)
        _fsync_dir(folder)
        self._switch(folder)
        remove_journals_before(self.journal_dir, number)
        self._prune()
        return stats

    def _cut(
        self, db: CountingDatabase, number: int, target: Path
    ) -> dict[str, tuple[Snapshot, list[bytes], list[dict]]]:
        """Under the store's lock: each collection's documents and indexes if it changed
        since the last snapshot (else that snapshot's files), and the journal switched to
        the file numbered like this snapshot, so that no write falls between the two."""
        changed: dict[str, tuple[Snapshot, list[bytes], list[dict]]] = {}
        with db.locked():
            raw = db.raw
            for name in raw.list_collection_names():
                collection = raw[name]
                store = collection._store
                seen = Snapshot(id(store), getattr(store, "generation", 0), target)
                before = self._last.get(name)
                if before and (before.store_id, before.generation) == (
                    seen.store_id,
                    seen.generation,
                ):
                    changed[name] = (before, [], [])
                    continue
                encoded = self._encode(name, store)
                indexes = dump.index_specs(collection.index_information())
                changed[name] = (seen, encoded, indexes)
            if self.journal is not None:  # later writes: the journal after this snapshot
                self.journal.rotate(number)
        return changed

    def _encode(self, name: str, store: Any) -> list[bytes]:
        """Every document of a collection's store as BSON, in the store's order (under the
        store's lock). Documents written since this collection's last snapshot are encoded
        again; the others are the bytes kept from then. The embedded store's write hook
        names each document an insert or an update touched in `store.changed_ids`, a set this
        method puts on the store and empties; a store met for the first time (or again after
        a drop, as another object) is encoded whole."""
        documents = list(store.documents)  # (mongomock's TTL pass runs here, as before)
        keys = list(store._documents)
        kept = self._encoded.get(name)
        changed = getattr(store, "changed_ids", None)
        if kept is None or kept[0] is not store or changed is None:
            fresh = {key: bson.encode(doc) for key, doc in zip(keys, documents, strict=True)}
        else:
            before = kept[1]
            fresh = {
                key: before[key] if key in before and key not in changed else bson.encode(doc)
                for key, doc in zip(keys, documents, strict=True)
            }
        store.changed_ids = set()
        self._encoded[name] = (store, fresh)
        return list(fresh.values())

    def _next_number(self) -> int:
        numbers = [int(p.name) for p in self.snapshots.iterdir() if p.name.isdigit()]
        return max(numbers + journal_numbers(self.journal_dir), default=0) + 1

    def _switch(self, folder: Path) -> None:
        link = self.root / "current.new"
        link.unlink(missing_ok=True)
        link.symlink_to(folder.relative_to(self.root))
        link.replace(self.current)  # rename(2): atomic
        _fsync_dir(self.root)

    def _prune(self) -> None:
        keep = self.current.resolve()
        folders = sorted(p for p in self.snapshots.iterdir() if p.name.isdigit())
        for folder in folders[:-KEEP_SNAPSHOTS]:
            if folder.resolve() != keep:
                shutil.rmtree(folder, ignore_errors=True)
        # A snapshot folder a crash left half-written, newer than current: never current.
        for folder in folders:
            if folder.name > keep.name:
                shutil.rmtree(folder, ignore_errors=True)

    @staticmethod
    def secret_key(root: Path) -> str:
        """The key that encrypts account secrets at rest, made once and kept (mode 0600)."""
        from crawlsched.resources.secrets import generate_key

        return _kept_key(root, SECRET_KEY_FILE, generate_key)

    @staticmethod
    def signing_key(root: Path) -> str:
        """The key the server's messages are signed with, made once and kept (mode 0600)."""
        return _kept_key(root, SIGNING_KEY_FILE, lambda: secrets.token_hex(32))

    # -- the API's address ------------------------------------------------------------------

    def write_api(self, url: str, token: str) -> None:
        path = self.root / API_FILE
        partial = self.root / f".{API_FILE}.partial"
        partial.unlink(missing_ok=True)
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
        with os.fdopen(fd, "w") as out:
            json.dump({"url": url, "token": token, "pid": os.getpid()}, out)
        partial.replace(path)

    def remove_api(self) -> None:
        (self.root / API_FILE).unlink(missing_ok=True)


def _kept_key(root: Path, name: str, make: Callable[[], str]) -> str:
    """The key in `root/name`, made by `make` on first use (written whole, then renamed)."""
    root.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
    os.chmod(root, DIR_MODE)
    path = root / name
    if not path.exists():
        partial = root / f".{name}.partial"
        partial.unlink(missing_ok=True)
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
        with os.fdopen(fd, "w") as out:
            out.write(make())
        partial.replace(path)
    return path.read_text().strip()


def restrict(root: Path) -> None:
    """Folders 0700 and files 0600 under `root` (and itself); links are left alone."""
    for folder, _dirs, files in os.walk(root):
        os.chmod(folder, DIR_MODE)
        for name in files:
            path = os.path.join(folder, name)
            if not os.path.islink(path):
                os.chmod(path, FILE_MODE)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)

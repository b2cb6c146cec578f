"""The store as a mongodump folder, moved as a stream of gzipped tar bytes: written from any
store (`store dump`), or loaded into one (`store load`), unpacked with a bound on what it
writes (`archives.untar_bounded`)."""

from __future__ import annotations

import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from crawlsched.archives import tar_chunks, untar_bounded
from crawlsched.control.writes import unanswered_writes
from crawlsched.runtime import Runtime
from crawlsched.store import dump as dumps
from crawlsched.store.tokens import TOKENS_COLLECTION

AGAIN = "Load it again with --drop: it replaces the collections, whatever was written."


def dump(rt: Runtime) -> Iterator[bytes]:
    """Every collection as `<db>/<collection>.bson` and `.metadata.json`, tarred and gzipped."""
    with tempfile.TemporaryDirectory(prefix="crawlsched-dump-") as folder:
        dumps.dump_database(rt.db, Path(folder) / rt.settings.mongo_db)
        yield from tar_chunks(Path(folder))


def load(
    rt: Runtime,
    chunks: Iterable[bytes],
    drop: bool = False,
    keep_tokens: bool = False,
    max_bytes: int | None = None,
) -> Iterator[dict[str, Any]]:
    """Load a dump sent as gzipped tar bytes (mongodump's layout, or a standalone data
    directory's `current`), unpacked within `max_bytes`. `keep_tokens`: a server keeps its own
    API tokens (the ones its clients hold would otherwise all stop working)."""
    keep = (TOKENS_COLLECTION,) if keep_tokens else ()
    with tempfile.TemporaryDirectory(prefix="crawlsched-load-") as folder:
        where = Path(folder)
        untar_bounded(chunks, where, max_bytes)
        source = where / "current" if (where / "current").is_dir() else where
        try:
            database = dumps.database_folder(source, rt.settings.mongo_db)
        except FileNotFoundError as e:
            raise ValueError(str(e).replace(str(where), "the dump")) from None
        with unanswered_writes("a write of the load", AGAIN):
            loaded = dumps.load_dump(rt.db, database, drop, keep=keep)
            rt.create_indexes()
        kept = bool(keep) and (database / f"{TOKENS_COLLECTION}.bson").exists()
        yield {"loaded": loaded, "tokens_kept": kept}

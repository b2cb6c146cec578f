"""MongoDB's own dump format, as `mongodump` writes it and `mongorestore` reads it.

A dump folder holds one folder per database; in it, per collection, `<name>.bson` (the
documents, one BSON document after another) and `<name>.metadata.json` (its indexes, in
canonical Extended JSON). `write_collection` writes one such pair, `load_dump` loads a folder
of them into any database (the embedded store or a real server).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import bson
from bson import json_util
from bson.son import SON

from crawlsched.errors import Conflict
from crawlsched.store.counting import CountingDatabase

JSON_OPTIONS = json_util.CANONICAL_JSON_OPTIONS
INSERT_CHUNK = 5000
# What an index keeps besides its key and name, in the metadata and on create_index.
INDEX_OPTIONS = ("unique", "sparse", "expireAfterSeconds", "partialFilterExpression")


def index_specs(index_information: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """pymongo's `index_information()` as the `indexes` of a metadata file."""
    specs = []
    for name, info in sorted(index_information.items()):
        spec: dict[str, Any] = {"v": 2, "key": SON(list(info["key"])), "name": name}
        spec.update({k: info[k] for k in INDEX_OPTIONS if k in info})
        specs.append(spec)
    return specs


def create_index_from_spec(collection: Any, spec: dict[str, Any]) -> None:
    """Create the index a metadata file's (or `index_specs`') spec describes (`_id_` is
    every collection's own)."""
    if spec["name"] == "_id_":
        return
    options = {k: spec[k] for k in INDEX_OPTIONS if k in spec}
    collection.create_index(list(spec["key"].items()), name=spec["name"], **options)


def metadata_json(collection_name: str, indexes: list[dict[str, Any]]) -> str:
    return json_util.dumps(
        {"indexes": indexes, "collectionName": collection_name, "type": "collection"},
        json_options=JSON_OPTIONS,
    )


def write_file(path: Path, chunks: Iterable[bytes], mode: int = 0o666) -> None:
    """Write `path` whole or not at all: a temporary file in the same folder, flushed to disk,
    then renamed over it. `mode` as for open(2) (the umask applies)."""
    partial = path.with_name(f".{path.name}.partial")
    partial.unlink(missing_ok=True)  # one a crash left: its mode would be kept
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as out:
        for chunk in chunks:
            out.write(chunk)
        out.flush()
        os.fsync(out.fileno())
    partial.replace(path)


def write_collection(
    folder: Path, name: str, encoded: list[bytes], indexes: list[dict], mode: int = 0o666
) -> None:
    write_file(folder / f"{name}.bson", encoded, mode)
    write_file(folder / f"{name}.metadata.json", [metadata_json(name, indexes).encode()], mode)


def read_documents(path: Path) -> Iterator[dict[str, Any]]:
    with path.open("rb") as stream:
        yield from bson.decode_file_iter(
            stream, bson.CodecOptions(document_class=dict, tz_aware=True)
        )


def read_indexes(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return json_util.loads(path.read_text()).get("indexes", [])


def database_folder(dump: Path, db_name: str) -> Path:
    """The folder to load into `db_name`: `dump/<db_name>/`, else the dump's only database
    folder (loaded under the new name, as `mongorestore --nsFrom/--nsTo` would), else `dump`
    itself when it holds the `.bson` files directly."""
    nested = dump / db_name
    if nested.is_dir():
        return nested
    databases = [d for d in dump.iterdir() if d.is_dir() and any(d.glob("*.bson"))]
    if len(databases) == 1:
        return databases[0]
    if any(dump.glob("*.bson")):
        return dump
    names = ", ".join(sorted(d.name for d in databases)) or "none"
    raise FileNotFoundError(f"{dump}: no {db_name}/ folder to load (databases there: {names})")


def load_dump(
    db: CountingDatabase, folder: Path, drop: bool = False, keep: Iterable[str] = ()
) -> dict[str, int]:
    """Load every collection of a dump folder: documents, then its indexes. Refuses a
    collection that already holds documents unless `drop` (then it is replaced). Collections
    named in `keep` are left as they are and not loaded."""
    files = sorted(f for f in folder.glob("*.bson") if f.stem not in set(keep))
    if not drop:
        busy = [f.stem for f in files if db[f.stem].estimated_document_count()]
        if busy:
            raise Conflict(
                f"collections already hold documents: {', '.join(busy)} (load with --drop to "
                "replace them)"
            )
    loaded: dict[str, int] = {}
    for path in files:
        collection = db[path.stem]
        if drop:
            collection.drop()
        count = 0
        chunk: list[dict[str, Any]] = []
        for doc in read_documents(path):
            chunk.append(doc)
            if len(chunk) >= INSERT_CHUNK:
                count += len(collection.insert_many(chunk).inserted_ids)
                chunk = []
        if chunk:
            count += len(collection.insert_many(chunk).inserted_ids)
        for spec in read_indexes(path.with_name(f"{path.stem}.metadata.json")):
            create_index_from_spec(collection, spec)
        loaded[path.stem] = count
    return loaded


def dump_database(db: CountingDatabase, folder: Path) -> dict[str, int]:
    """Write every collection of `db` to `folder` (a real server's or the embedded store)."""
    folder.mkdir(parents=True, exist_ok=True)
    written = {}
    for name in sorted(db.list_collection_names()):
        collection = db[name]
        encoded = [bson.encode(doc) for doc in collection.find({})]
        write_collection(folder, name, encoded, index_specs(collection.index_information()))
        written[name] = len(encoded)
    return written

"""bench_journal: what the standalone's journal costs a crawl's store commands.

A crawl of `bench_crawl.py`'s generated site runs once in-process (embedded store, stub
broker, T worker threads) and every store command it makes is recorded in the order the store
applied it (under the store's lock; arguments copied after the call, so an `_id` the store gave
an inserted document is in them). The recording is then replayed onto fresh embedded stores,
one thread, each command timed in the replaying thread's CPU time (`time.thread_time`: other
work on the machine does not count, the journal's `write(2)` calls do), in three set-ups
alternated `--repeat` times:

- `plain`: the store as it was before the journal (a bare re-entrant lock);
- `off`: the journal's lock with nothing recorded (what every other user of the embedded store
  now runs);
- `journal`: writes recorded and appended to a journal file as they are applied, its flush
  thread running every `--fsync-ms`, as in `crawlsched standalone`.

Figures (the JSON line last), medians over the rounds:
- `journal_ratio`: a crawl's commands per second with the journal ÷ without, from the
  journal's own work timed directly in the `journal` rounds (making each record: encoding the
  documents it holds and appending it, `WriteEffects.commit`): (all - record) ÷ all, in CPU.
  Target ≥ 0.8. `write_ratio`: the same over the write commands alone. `record_us_per_write`:
  that work per write command; `journal_bytes_per_write`;
- `ab_ratio`, `ab_ratio_best`, `off_ratio`: the same question asked by comparing whole rounds
  (journal ÷ plain, median and best round; off ÷ plain). Context only: on a shared machine the
  rounds differ by more than the journal costs;
- `commands_per_s` (CPU, each set-up) and `wall_commands_per_s` (context);
- what a durable answer costs: `sync_ms` (one journal flush after a write) against
  `snapshot_ms` (a snapshot after the same write, the answer's cost before the journal),
  medians of 20, on a store holding the whole crawl.

    .venv/bin/python benchmarks/bench_journal.py [--pages 1000] [--threads 8] [--repeat 5]
        [--fsync-ms 50]
"""

from __future__ import annotations

import argparse
import copy
import json
import shutil
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
for path in (REPO_ROOT, REPO_ROOT / "benchmarks"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from bench_crawl import Site, crawlsched_run, start_crawlsched  # noqa: E402

from crawlsched.standalone.datadir import DataDir  # noqa: E402
from crawlsched.store import counting  # noqa: E402
from crawlsched.store.client import drop_embedded, open_database  # noqa: E402
from crawlsched.store.counting import CommandCounter, CountingDatabase  # noqa: E402
from crawlsched.store.embedded.effects import WriteEffects  # noqa: E402

WRITES = frozenset(
    {
        "insert_one", "insert_many", "update_one", "update_many", "replace_one", "delete_one",
        "delete_many", "bulk_write", "find_one_and_update", "find_one_and_replace",
        "find_one_and_delete", "create_index", "drop_index", "drop",
    }
)  # fmt: skip
Command = tuple[str, str, tuple, dict]
SETUPS = ("plain", "off", "journal")


def record_crawl(pages: int, threads: int) -> list[Command]:
    """Every store command of one crawl, in the order the store applied them."""
    recorded: list[Command] = []
    original = counting.CountingCollection.__getattr__

    def recording(self: Any, attr: str) -> Any:
        value = original(self, attr)
        if not callable(value) or attr.startswith("_") or attr in counting._LOCAL:
            return value

        def call(*args: Any, **kwargs: Any) -> Any:
            with self._lock:  # re-entrant: the command takes it again inside
                result = value(*args, **kwargs)
                entry = (self._name, attr, copy.deepcopy(args), copy.deepcopy(kwargs))
                recorded.append(entry)
            return result

        return call

    setup = start_crawlsched(threads, pages)
    site = Site(pages)
    counting.CountingCollection.__getattr__ = recording
    try:
        crawlsched_run(site, threads, "bench-journal", setup)
    finally:
        counting.CountingCollection.__getattr__ = original
        setup["worker"].stop()
        site.close()
    return recorded


def replay(commands: list[Command], setup: str, fsync_ms: float) -> dict[str, Any]:
    """Run `commands` on a fresh store in one thread: CPU seconds in all commands and in the
    writes, wall seconds, and the journal's size."""
    url = f"mongomock://bench-journal-{uuid.uuid4().hex[:8]}"
    root = Path(tempfile.mkdtemp(prefix="bench-journal-"))
    db = open_database(url, "crawlsched")
    if setup == "plain":
        db = CountingDatabase(db.raw, CommandCounter(), threading.RLock())
    data = DataDir(root, "crawlsched")
    flusher = None
    if setup == "journal":
        data.start_journal(db)
        flusher = _Flusher(data, fsync_ms / 1000)
    calls = [(n, m, copy.deepcopy(a), copy.deepcopy(k)) for n, m, a, k in commands]
    cpu = {"all": 0.0, "writes": 0.0, "records": 0.0}
    commit = WriteEffects.commit

    def timed_commit(effects: WriteEffects) -> None:
        begun = time.thread_time()
        commit(effects)
        cpu["records"] += time.thread_time() - begun

    WriteEffects.commit = timed_commit
    try:
        started = time.perf_counter()
        for name, method, args, kwargs in calls:
            begun = time.thread_time()
            try:
                result = getattr(db[name], method)(*args, **kwargs)
                if hasattr(result, "__next__"):
                    list(result)
            except Exception:  # as it raised in the crawl (a refused insert, say)
                pass
            took = time.thread_time() - begun
            cpu["all"] += took
            if method in WRITES:
                cpu["writes"] += took
        wall = time.perf_counter() - started
        journaled = data.journal.appended_bytes if data.journal else 0
        return {"cpu": cpu, "wall": wall, "journal_bytes": journaled}
    finally:
        WriteEffects.commit = commit
        if flusher:
            flusher.stop()
        if setup == "journal":
            data.close_journal(db)
        drop_embedded(url)
        shutil.rmtree(root, ignore_errors=True)


class _Flusher(threading.Thread):
    def __init__(self, data: DataDir, period_s: float) -> None:
        super().__init__(daemon=True)
        self.data, self.period_s, self.halt = data, period_s, threading.Event()
        self.start()

    def run(self) -> None:
        while not self.halt.wait(self.period_s):
            self.data.journal.sync()

    def stop(self) -> None:
        self.halt.set()
        self.join()


def durable_answer_costs(commands: list[Command], rounds: int = 20) -> dict[str, float]:
    """A write, then one journal flush; the same write, then one snapshot (medians, ms), on a
    store holding the whole crawl."""
    url = f"mongomock://bench-journal-{uuid.uuid4().hex[:8]}"
    root = Path(tempfile.mkdtemp(prefix="bench-journal-"))
    db = open_database(url, "crawlsched")
    data = DataDir(root, "crawlsched")
    try:
        for name, method, args, kwargs in commands:
            try:
                getattr(db[name], method)(*copy.deepcopy(args), **copy.deepcopy(kwargs))
            except Exception:
                continue
        data.start_journal(db)
        syncs, snapshots = [], []
        for i in range(rounds):
            db.runs.update_one({"_id": "answer"}, {"$set": {"n": i}}, upsert=True)
            started = time.perf_counter()
            data.journal.sync()
            syncs.append(time.perf_counter() - started)
            db.runs.update_one({"_id": "answer"}, {"$set": {"m": i}})
            started = time.perf_counter()
            data.snapshot(db)
            snapshots.append(time.perf_counter() - started)
        return {
            "sync_ms": round(statistics.median(syncs) * 1000, 2),
            "snapshot_ms": round(statistics.median(snapshots) * 1000, 2),
        }
    finally:
        data.close_journal(db)
        drop_embedded(url)
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=1000)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--fsync-ms", type=float, default=50.0)
    args = parser.parse_args()
    commands = record_crawl(args.pages, args.threads)
    writes = sum(1 for _, method, _, _ in commands if method in WRITES)
    print(f"recorded {len(commands)} commands ({writes} writes) of a {args.pages}-page crawl")
    runs: dict[str, list[dict]] = {setup: [] for setup in SETUPS}
    for n in range(args.repeat):
        for setup in SETUPS:
            result = replay(commands, setup, args.fsync_ms)
            runs[setup].append(result)
            print(
                f"  round {n + 1} {setup:>7}: {len(commands) / result['cpu']['all']:,.0f} cmd/s "
                f"CPU, writes {result['cpu']['writes']:.3f} s, wall {result['wall']:.2f} s"
            )

    def median(setup: str, key: str) -> float:
        return statistics.median(r["cpu"][key] for r in runs[setup])

    def best(setup: str, key: str) -> float:
        return min(r["cpu"][key] for r in runs[setup])

    rate = {s: len(commands) / median(s, "all") for s in SETUPS}
    wall = {s: len(commands) / statistics.median(r["wall"] for r in runs[s]) for s in SETUPS}
    records = median("journal", "records")
    journal_bytes = runs["journal"][0]["journal_bytes"]
    figures = {
        "bench": "journal",
        "pages": args.pages,
        "commands": len(commands),
        "writes": writes,
        "journal_ratio": round(1 - records / median("journal", "all"), 3),
        "write_ratio": round(1 - records / median("journal", "writes"), 3),
        "record_us_per_write": round(records / max(writes, 1) * 1e6, 1),
        "journal_bytes_per_write": round(journal_bytes / max(writes, 1)),
        "ab_ratio": round(rate["journal"] / rate["plain"], 3),
        "ab_ratio_best": round(best("plain", "all") / best("journal", "all"), 3),
        "off_ratio": round(rate["off"] / rate["plain"], 3),
        "commands_per_s": {s: round(r) for s, r in rate.items()},
        "wall_commands_per_s": {s: round(r) for s, r in wall.items()},
        **durable_answer_costs(commands),
    }
    print(json.dumps(figures))


if __name__ == "__main__":
    main()

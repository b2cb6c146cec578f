"""Planner benchmark: plan and claim N due jobs (4 categories, 20 media) on one store.

    .venv/bin/python benchmarks/bench_planner.py [--jobs 10000] [--repeat 3]
        [--mongo-url mongodb://host:port/ [--mongo-jobs N]] [--mongoeco [--mongo-jobs 1000]]

Headline: `plan_ratio` = time of crawlsched.flow.planning.plan_collection (audit, due tasks,
pipeline per task, parse, batch, claim, dispatch to a collecting callable) ÷ time of one plain
`list(find(due_filter))` of the same jobs on the same store in the same run. Plus MongoDB
commands per job at the store boundary (target <= 0.05); against a server (--mongo-url or
--mongoeco) the wire count from pymongo command monitoring too, asserted equal.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import resource
import sys
import time
import tracemalloc
import uuid
from collections import Counter, defaultdict
from typing import Any

import _workload as w
import bson

from crawlsched.flow import planning as planning_module
from crawlsched.runtime import Runtime
from crawlsched.settings import Settings
from crawlsched.store.client import drop_embedded
from crawlsched.store.counting import CommandCounter
from crawlsched.store.pipeline import due_filter

TARGET_COMMANDS_PER_JOB = 0.05


class StepTimer:
    """Wall time per planning step, by wrapping the store's methods and the pure helpers."""

    def __init__(self) -> None:
        self.ms: dict[str, float] = defaultdict(float)

    def wrap(self, name: str, fn):
        @functools.wraps(fn)
        def timed(*args, **kwargs):
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.ms[name] += (time.perf_counter() - started) * 1000

        return timed

    def wrap_stream(self, name: str, fn, sizes: list[int]):
        """Time a generator step by step, and note each row's BSON size (the largest document
        the planner receives: with a `$facet` it would be one holding every due job)."""

        @functools.wraps(fn)
        def timed(*args, **kwargs):
            rows = fn(*args, **kwargs)
            while True:
                started = time.perf_counter()
                try:
                    row = next(rows)
                except StopIteration:
                    return
                finally:
                    self.ms[name] += (time.perf_counter() - started) * 1000
                sizes.append(len(bson.encode(row)))
                yield row

        return timed

    @contextlib.contextmanager
    def patch_module(self):
        originals = {name: getattr(planning_module, name) for name in ("parse_due_job",)}
        try:
            planning_module.parse_due_job = self.wrap("parse", originals["parse_due_job"])
            yield
        finally:
            for name, fn in originals.items():
                setattr(planning_module, name, fn)


def one_round(
    url: str, db_name: str, n: int, seed: int, baseline_reads: int = 3, trace_memory: bool = False
) -> dict[str, Any]:
    counter = CommandCounter()
    settings = Settings(mongo_url=url, mongo_db=db_name, default_batch_limit=w.BATCH_LIMIT)
    rt = Runtime(settings, counter=counter)
    ref = w.reference()
    now = w.utc_now()
    rt.create_indexes()
    rt.reference.load(ref)
    raw_jobs = rt.db["profiles"].raw
    raw_jobs.insert_many(w.job_docs(n, ref, now, seed=seed))

    # Baseline: one plain read of the due jobs, same store, same filter (best of a few).
    read_s = []
    for _ in range(baseline_reads):
        started = time.perf_counter()
        got = len(list(raw_jobs.find(due_filter(now))))
        read_s.append(time.perf_counter() - started)
    assert got == n, f"baseline read {got} due jobs, expected {n}"

    store = rt.jobs("profiles")
    steps = StepTimer()
    for method in ("audit", "due_tasks", "set_aside", "claim"):
        setattr(store, method, steps.wrap(method, getattr(store, method)))
    row_sizes: list[int] = []
    store.due_rows = steps.wrap_stream("due_rows (cursor)", store.due_rows, row_sizes)
    messages: list = []
    stats: Counter = Counter()
    counter.reset()
    counter.measure_replies = True
    if trace_memory:  # slows planning several times over: a round of its own
        tracemalloc.start()
    with steps.patch_module():
        started = time.perf_counter()
        planning_module.plan_collection(
            rt, store, f"bench-{uuid.uuid4().hex[:8]}", now, messages.append, stats
        )
        plan_s = time.perf_counter() - started
    peak_bytes = 0
    if trace_memory:
        _, peak_bytes = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    boundary = dict(counter.boundary)
    wire = dict(counter.wire)
    planned = sum(len(m.job_ids) for m in messages)
    running = raw_jobs.count_documents({"state": 2})
    return {
        "plan_s": plan_s,
        "read_s": min(read_s),
        "planned": planned,
        "claimed_in_db": running,
        "batches": len(messages),
        "boundary": boundary,
        "boundary_total": sum(boundary.values()),
        "wire": wire,
        "wire_total": sum(wire.values()),
        "getmore": counter.wire_cursor_continuations,
        "steps_ms": dict(steps.ms),
        "stats": dict(stats),
        # On a server: the largest reply of any command (pymongo monitoring); on the embedded
        # store (no wire): the largest document handed to the planner.
        "max_reply_bytes": counter.max_reply_bytes or max(row_sizes, default=0),
        "peak_alloc_mb": round(peak_bytes / 2**20, 1),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def run_embedded(n: int, repeat: int, memory: bool) -> list[dict[str, Any]]:
    rounds = []
    for i in range(repeat):
        url = f"mongomock://bench-planner-{os.getpid()}-{i}"
        try:
            rounds.append(one_round(url, "bench", n, seed=42 + i))
        finally:
            drop_embedded(url)
    if memory:
        url = f"mongomock://bench-planner-{os.getpid()}-memory"
        try:
            traced = one_round(url, "bench", n, seed=42, trace_memory=True)
        finally:
            drop_embedded(url)
        for r in rounds:
            r["peak_alloc_mb"] = traced["peak_alloc_mb"]
    return rounds


def run_server(url: str, n: int) -> dict[str, Any]:
    import pymongo

    db_name = f"bench_planner_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    try:
        return one_round(url, db_name, n, seed=7, baseline_reads=2)
    finally:
        with pymongo.MongoClient(url, serverSelectionTimeoutMS=5000) as client:
            client.drop_database(db_name)


def report_rounds(label: str, n: int, rounds: list[dict[str, Any]]) -> dict[str, Any]:
    ratios = [r["plan_s"] / r["read_s"] for r in rounds]
    mid = sorted(range(len(rounds)), key=lambda i: ratios[i])[len(rounds) // 2]
    r = rounds[mid]
    per_job = r["boundary_total"] / n
    rows: list[tuple[str, Any]] = [
        ("jobs (due)", n),
        ("rounds (fresh store each)", len(rounds)),
        ("plan_ratio = plan+claim / plain read  (median)", round(w.median(ratios), 2)),
        ("  ratio per round", ", ".join(f"{x:.2f}" for x in ratios)),
        ("  plan+claim ms (median round, context)", round(r["plan_s"] * 1000, 1)),
        ("  plain read ms (same round, context)", round(r["read_s"] * 1000, 1)),
        ("jobs planned (claimed, in messages)", r["planned"]),
        ("jobs running in the store afterwards", r["claimed_in_db"]),
        ("batches (BatchMessages dispatched)", r["batches"]),
        ("MongoDB commands (boundary)", r["boundary_total"]),
        ("  by method", r["boundary"]),
        (f"commands per job (target <= {TARGET_COMMANDS_PER_JOB})", round(per_job, 5)),
        ("  meets target", per_job <= TARGET_COMMANDS_PER_JOB),
    ]
    total_ms = r["plan_s"] * 1000
    for step in ("audit", "due_tasks", "due_rows (cursor)", "parse", "set_aside", "claim"):
        ms = r["steps_ms"].get(step, 0.0)
        rows.append((f"  step {step}: share of plan time", f"{ms / total_ms:6.1%}  ({ms:.1f} ms)"))
    rest = total_ms - sum(r["steps_ms"].values())
    rows.append(
        (
            "  step rest (cutting, BatchMessage build, loop)",
            f"{rest / total_ms:6.1%}  ({rest:.1f} ms)",
        )
    )
    rows += [
        ("ms per job (plan+claim)", round(r["plan_s"] * 1000 / n, 4)),
        ("largest document/reply (BSON bytes)", r["max_reply_bytes"]),
        ("planner's peak allocations (MB, tracemalloc, own round)", r["peak_alloc_mb"]),
        ("process peak RSS (MB; the embedded store holds every job too)", r["peak_rss_mb"]),
    ]
    if r["wire"] or label != "embedded (mongomock)":
        rows += [
            ("MongoDB commands (wire, pymongo monitoring)", r["wire_total"]),
            ("  by command", r["wire"]),
            ("  getMore continuations (not counted)", r["getmore"]),
            ("  boundary == wire", r["boundary_total"] == r["wire_total"]),
        ]
    w.print_table(f"planner on {label}", rows)
    assert r["planned"] == n == r["claimed_in_db"], "not every due job was planned and claimed"
    return {
        "backend": label,
        "jobs": n,
        "plan_ratio": round(w.median(ratios), 3),
        "plan_ms": round(r["plan_s"] * 1000, 1),
        "plain_read_ms": round(r["read_s"] * 1000, 1),
        "planned": r["planned"],
        "batches": r["batches"],
        "commands_boundary": r["boundary_total"],
        "commands_wire": r["wire_total"] if r["wire"] else None,
        "commands_per_job": round(per_job, 6),
        "commands_per_job_target": TARGET_COMMANDS_PER_JOB,
        "meets_target": per_job <= TARGET_COMMANDS_PER_JOB,
        "ms_per_job": round(r["plan_s"] * 1000 / n, 4),
        "max_reply_bytes": r["max_reply_bytes"],
        "peak_alloc_mb": r["peak_alloc_mb"],
        "peak_rss_mb": r["peak_rss_mb"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=1, help="rounds on the embedded store")
    parser.add_argument(
        "--no-memory", action="store_true", help="skip the (slow) tracemalloc round"
    )
    parser.add_argument("--mongo-url", help="also run against this MongoDB server")
    parser.add_argument(
        "--mongoeco", action="store_true", help="start a mongoeco server and run there"
    )
    parser.add_argument(
        "--mongo-jobs", type=int, help="N on a server (default: --jobs; 1000 on mongoeco)"
    )
    args = parser.parse_args()

    figures: dict[str, Any] = {"benchmark": "planner"}
    figures["embedded"] = report_rounds(
        "embedded (mongomock)", args.jobs, run_embedded(args.jobs, args.repeat, not args.no_memory)
    )
    if args.mongo_url:
        n = args.mongo_jobs or args.jobs
        result = run_server(args.mongo_url, n)
        figures["server"] = report_rounds(f"server {args.mongo_url}", n, [result])
        assert result["boundary_total"] == result["wire_total"], "boundary and wire counts differ"
    if args.mongoeco:
        from tests.support.mongo_server import MongoecoServer

        n = args.mongo_jobs or 1_000
        server = MongoecoServer(start_timeout=60)
        server.start()
        try:
            result = run_server(server.url, n)
        finally:
            server.stop()
        figures["mongoeco"] = report_rounds("mongoeco (wire server)", n, [result])
        assert result["boundary_total"] == result["wire_total"], "boundary and wire counts differ"
    print()
    w.print_json(figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())

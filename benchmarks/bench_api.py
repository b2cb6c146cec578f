"""bench_api: the HTTP API over a seeded store vs the same queries made directly, and the
standalone server's data directory (snapshot, load, start) vs plain BSON work, in one run.

Seeded on one embedded store (mongomock, `mongomock://bench-api-<pid>`, indexes created first):
S schedules (default 10,000; interval triggers drawn from 1 min … 1 day, 100 owners; documents
from `crawlsched.schedules.spec.build_schedule`, one `insert_many`), R runs (default 100,000;
finished, stopped or running, with counts, created over the past weeks) and R task history rows
(one `insert_many` each). A read token is made with `rt.tokens.create`.

(1) API, served by real uvicorn on 127.0.0.1 (free port, a thread of this process, log level
    warning), called with one keep-alive `httpx.Client`, each request timed from send to the
    body read, N requests (default 200) of each:
      runs      GET /v1/runs?limit=100
      upcoming  GET /v1/schedules/{id}/upcoming   (a random existing schedule each time,
                default horizon: every fire time of the next 3 days is computed, 100 shown)
(2) direct, the baseline: the same queries on the same runtime, same ids, same order:
      runs      rt.runs.page(101, 0)
      upcoming  rt.schedules.get(id) then schedule_ops.upcoming_runs(rt, [doc], horizon)
    Both sides get a few untimed warm-up calls first.

(2b) the framework's floor: the API's own answers (bytes), served again by a bare FastAPI app
    (one sync route each, no token, no store, no validation) on a second uvicorn in this
    process, through the same client, interleaved with the others.

    `api_over_floor_runs_p50`, `api_over_floor_upcoming_p50` (and _p99) = API ÷ floor
    (target ≤ 1.5): what the app adds over routing, the thread-pool hop and HTTP.
    `api_ratio_runs_p50`, `api_ratio_upcoming_p50` (and _p99) = API ÷ direct, for context.
    What the API adds over the floor and the ratio therefore includes: FastAPI routing among
    all the API's routes and query validation, the bearer token check (on the event loop: a
    SHA-256 and the token cache, `api/token_cache.py`, filled by the warm-up; the store is read
    only on a miss), the store's read and the encoding. Runs: the `created_at` ordered index
    walked for the ids and revisions of the newest 101 that pass the filter, then the JSON row
    kept for each run at that revision (`api/run_rows.py`; a run whose revision changed is read
    by id and encoded again: none here, the seeded runs do not change while they are read).
    The embedded store marks each collection's writes, so a page read while no run was written
    is answered again whole until a run is written: the timed runs requests read no store.
    `api_over_floor_runs_written_p50` (context, no target) is the same page with a run written
    (untimed) before each request: the page is listed again and one row encoded again.
    Upcoming: `plain()` of the 100 items and the JSON encoding of the page. The routes return
    the encoded page: no `response_model` validation. Both sides make one thread-pool hop (the sync route). The
    client runs in the same process as the server, so both share the GIL: the ratio is an upper
    bound of what a remote client would see.

(3) standalone data directory (a `tempfile.TemporaryDirectory`), on another embedded store
    holding J job documents in `profiles` (default 100,000; shaped as benchmarks/_workload.py
    makes them, which is what the planner reads):
      snapshot_s        `DataDir(root, "crawlsched").snapshot(rt.db)`: every document encoded
                        to BSON under the store's lock, written in mongodump layout, fsynced
      resnapshot_s      a second snapshot with nothing changed (hard links to the first's files)
      load_s            `DataDir.load_into(db)` into a fresh `mongomock://bench-load` store
      standalone_start_s  `crawlsched standalone` as a subprocess (CRAWLSCHED_DATA_DIR=<dir>,
                        CRAWLSCHED_API_PORT=0, a fresh CRAWLSCHED_SECRET_KEY) from the spawn to
                        GET /health answering, any status (URL from <dir>/api.json);
                        stopped with SIGTERM (its final snapshot), `stop_s` timed too.
    and their baselines, same run, same documents:
      encode_s          `bson.encode` of every job document (what any dump must do)
      insert_s          `insert_many` of the same documents into a fresh embedded store
      python_start_s    `python -c "import crawlsched.api"`: interpreter + imports, as context

    `snapshot_ratio`   = snapshot_s ÷ encode_s   (what writing, indexes and fsync add to encoding)
    `resnapshot_ratio` = resnapshot_s ÷ snapshot_s (target: far below 1; nothing is re-encoded)
    `load_ratio`       = load_s ÷ insert_s       (decoding + indexes vs inserting ready dicts)
    `start_ratio`      = standalone_start_s ÷ (python_start_s + load_s): what the server's
                         start adds beyond importing and loading its data (reference data,
                         default sweeps, worker threads, uvicorn)

(4) an unauthenticated huge body, on the same `crawlsched standalone` subprocess once it
    answers: `POST /v1/imports` with `Content-Length: 200 MB` and no token, its body sent in 1 MiB
    blocks on a raw socket until the server answers and closes (or all of it is sent), while
    the server's VmRSS (/proc/<pid>/status) is read every few milliseconds.
      unauth_body_growth_mb  its peak RSS over its RSS before the request, in MB (target ≤ 10:
                             the token is checked before a byte of the body is read)
      unauth_body_status     the status the server answered (401)

Absolute seconds are printed as context; the headlines are the ratios.

    .venv/bin/python benchmarks/bench_api.py [--schedules 10000] [--runs 100000] [--jobs 100000]
                                             [--requests 200] [--quick] [--no-standalone-process]

`--quick`: 1,000 schedules, 10,000 runs and history rows, 10,000 jobs, 50 requests (< 1 min).
Last line: JSON with every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
BENCH_DIR = Path(__file__).resolve().parent
for path in (REPO_ROOT, BENCH_DIR):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

import bson  # noqa: E402
import httpx  # noqa: E402
from _workload import job_docs, print_table  # noqa: E402
from _workload import reference as bench_reference  # noqa: E402
from bson import ObjectId  # noqa: E402

OWNERS = 100
INTERVALS_S = (60, 300, 600, 900, 1800, 3600, 4 * 3600, 6 * 3600, 12 * 3600, 86400)
OUTCOMES = ("succeeded", "failed", "not_found", "retry")
WARMUP = 5


# -- seeding ----------------------------------------------------------------------------------


def schedule_docs(n: int, now: datetime, rng: random.Random) -> list[dict[str, Any]]:
    from crawlsched.schedules.spec import build_schedule

    return [
        build_schedule(
            f"bench-{i:05d}",
            {
                "interval_s": rng.choice(INTERVALS_S),
                "owner": f"owner-{i % OWNERS:03d}",
                "collections": ["profiles"],
            },
            now,
        )
        for i in range(n)
    ]


def run_docs(n: int, schedule_ids: list[str], now: datetime, rng: random.Random) -> list[dict]:
    """Runs one to seven seconds apart going back from now (distinct ids), mostly finished."""
    from crawlsched.planning.run_names import FINISHED, RUNNING, STOPPED, run_id_for

    docs = []
    at = now
    for i in range(n):
        at -= timedelta(seconds=rng.randint(1, 7))
        schedule_id = rng.choice(schedule_ids)
        planned = rng.randint(1, 500)
        state = FINISHED if i >= 20 else RUNNING  # the newest few are still going
        if state == FINISHED and rng.random() < 0.02:
            state = STOPPED
        failed = rng.randint(0, planned // 10)
        done = planned if state != RUNNING else rng.randint(0, planned)
        docs.append(
            {
                "_id": run_id_for(schedule_id, at),
                "schedule_id": schedule_id,
                "parent_id": None,
                "fire_at": at,
                "state": state,
                "planning": False,
                "outstanding": planned - done,
                "planned": planned,
                "planned_at": at + timedelta(milliseconds=rng.randint(5, 900)),
                "plan_stats": {"collections": 1, "batches": planned // 100 + 1},
                "children": 0,
                "counts": {"succeeded": done - min(failed, done), "failed": min(failed, done)},
                "discovered": 0,
                "links_discovered": 0,
                "stages_ms": {
                    "plan": round(rng.uniform(5, 900), 1),
                    "admit": round(rng.uniform(1, 200), 1),
                    "crawl": round(rng.uniform(100, 60_000), 1),
                },
                "reports": [],
                "created_at": at,
                "rev": ObjectId(),  # as `MongoRunStore.open` makes every run
                **({"ended_at": at + timedelta(seconds=rng.randint(1, 600))} if done else {}),
            }
        )
    return docs


def history_rows(runs: list[dict], n: int, rng: random.Random) -> list[dict[str, Any]]:
    rows = []
    for i in range(n):
        run = runs[i % len(runs)]
        started = run["created_at"] + timedelta(seconds=rng.uniform(0, 60))
        outcome = rng.choices(OUTCOMES, weights=(85, 8, 5, 2))[0]
        rows.append(
            {
                "_id": ObjectId(),
                "run_id": run["_id"],
                "schedule_id": run["schedule_id"],
                "dispatch_id": f"d{i // 100:06d}",
                "collection": "profiles",
                "task": rng.choice(("profile", "publication")),
                "media_name": f"bench_m_{i % 20}",
                "account": None,
                "node": None,
                "worker": "bench:1",
                "job_id": str(ObjectId()),
                "started_at": started,
                "ended_at": started + timedelta(seconds=rng.uniform(0.1, 5)),
                "outcome": outcome,
                "error": None if outcome == "succeeded" else f"{outcome}: bench",
                "items_stored": rng.randint(0, 40) if outcome == "succeeded" else 0,
            }
        )
    return rows


def make_runtime(url: str) -> Any:
    from crawlsched.resources.secrets import generate_key
    from crawlsched.runtime import Runtime
    from crawlsched.settings import Settings

    settings = Settings(mongo_url=url, broker_url="stub://", secret_key=generate_key())
    return Runtime(settings)


def usable_token(rt: Any) -> str:
    """A read token the API accepts. About 4 in 10 new tokens are refused (401): their random
    part may contain "_", and `store.tokens.token_id_of` splits the whole token on "_"."""
    while True:
        _, token = rt.tokens.create("read", "bench", rt.now())
        if rt.tokens.verify(token) is not None:
            return token


# -- timing -----------------------------------------------------------------------------------


def quantiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return {"p50_ms": statistics.median(ordered) * 1000, "p99_ms": p99 * 1000}


def timed_calls(call: Any, args: list[Any]) -> list[float]:
    samples = []
    for arg in args:
        started = time.perf_counter()
        call(arg)
        samples.append(time.perf_counter() - started)
    return samples


def clock(fn: Any, *args: Any, **kwargs: Any) -> tuple[Any, float]:
    started = time.perf_counter()
    value = fn(*args, **kwargs)
    return value, time.perf_counter() - started


class Served:
    """The app on real uvicorn in a thread of this process."""

    def __init__(self, app: Any) -> None:
        import uvicorn

        config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.01)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)


# -- (1) and (2): API vs direct ---------------------------------------------------------------


def bench_queries(args: argparse.Namespace, figures: dict[str, Any]) -> None:
    from crawlsched.api import create_app
    from crawlsched.flow import schedule_ops
    from crawlsched.schedules.spec import horizon
    from crawlsched.store.client import drop_embedded

    url = f"mongomock://bench-api-{os.getpid()}"
    rt = make_runtime(url)
    rng = random.Random(7)
    now = rt.now()
    rt.create_indexes()
    started = time.perf_counter()
    schedules = schedule_docs(args.schedules, now, rng)
    rt.db.schedules.insert_many(schedules)
    runs = run_docs(args.runs, [d["_id"] for d in schedules], now, rng)
    rt.db.runs.insert_many(runs)
    if args.history:
        rt.db.task_history.insert_many(history_rows(runs, args.history, rng))
    seed_s = time.perf_counter() - started
    token = usable_token(rt)

    ids = [rng.choice(schedules)["_id"] for _ in range(args.requests)]
    runs_rounds = [None] * args.runs_requests
    span = horizon(rt.settings.schedule_horizon_days)

    def direct_runs(_: Any) -> Any:
        return rt.runs.page(101, 0)

    def direct_upcoming(schedule_id: str) -> Any:
        doc = rt.schedules.get(schedule_id)
        return schedule_ops.upcoming_runs(rt, [doc], span)

    # /health with one check that does nothing: the floor of a request through the stack.
    # (The default checks are not used: see the README, the mongodb check fails.)
    app = create_app(rt, delivers=False, health_checks={"none": lambda: {"ok": True}})
    served = Served(app)
    answers: dict[str, bytes] = {}  # the API's own answers, served again by the floor
    floor = Served(floor_app(answers))
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=served.url, headers=headers, timeout=120) as client:

        def api_runs(_: Any) -> Any:
            response = client.get("/v1/runs", params={"limit": 100})
            response.raise_for_status()
            return response.json()

        def api_upcoming(schedule_id: str) -> Any:
            response = client.get(f"/v1/schedules/{schedule_id}/upcoming")
            response.raise_for_status()
            return response.json()

        # Same answers? (the first page of runs, the first 100 fire times of one schedule)
        page = api_runs(None)
        direct = rt.runs.page(101, 0)
        same_runs = [r["_id"] for r in page["items"]] == [r["_id"] for r in direct[:100]]
        up = api_upcoming(ids[0])
        direct_up = direct_upcoming(ids[0])
        same_upcoming = [r["fire_at"] for r in up["items"]] == [
            at.isoformat() for _, at in direct_up[:100]
        ]
        for _ in range(WARMUP):
            api_runs(None), direct_runs(None), api_upcoming(ids[0]), direct_upcoming(ids[0])

        # The floor: the same bytes, from a bare FastAPI route (same process, same client).
        answers["runs"] = client.get("/v1/runs", params={"limit": 100}).content
        for schedule_id in set(ids):
            answers[schedule_id] = client.get(f"/v1/schedules/{schedule_id}/upcoming").content

        def floor_runs(_: Any) -> Any:
            response = client.get(f"{floor.url}/runs")
            response.raise_for_status()
            return response.json()

        def floor_upcoming(schedule_id: str) -> Any:
            response = client.get(f"{floor.url}/upcoming/{schedule_id}")
            response.raise_for_status()
            return response.json()

        same_floor = floor_runs(None) == page and floor_upcoming(ids[0]) == up
        for _ in range(WARMUP):
            floor_runs(None), floor_upcoming(ids[0])

        def health(_: Any) -> Any:
            client.get("/health").raise_for_status()

        newest = direct[0]["_id"]

        def api_runs_after_a_write(chunk: list[Any]) -> list[float]:
            """The page as a busy standalone serves it: a run written before each request
            (untimed), so the page kept whole is never reused; only its other rows are."""
            samples = []
            for _ in chunk:
                rt.runs.add_stage_time(newest, "plan", 0.001)
                samples += timed_calls(api_runs, [None])
            return samples

        # Interleaved in blocks so that a slow spell of the machine hits both sides.
        sides = ("api", "direct", "floor")
        samples: dict[str, list[float]] = {
            f"{side}_{name}": [] for side in sides for name in ("runs", "up")
        }
        samples["health"] = []
        samples["api_runs_written"] = []
        block = 5
        for i in range(0, args.runs_requests, block):
            chunk = runs_rounds[i : i + block]
            samples["api_runs"] += timed_calls(api_runs, chunk)
            samples["direct_runs"] += timed_calls(direct_runs, chunk)
            samples["floor_runs"] += timed_calls(floor_runs, chunk)
            samples["api_runs_written"] += api_runs_after_a_write(chunk)
        for i in range(0, args.requests, block):
            chunk = ids[i : i + block]
            samples["api_up"] += timed_calls(api_upcoming, chunk)
            samples["direct_up"] += timed_calls(direct_upcoming, chunk)
            samples["floor_up"] += timed_calls(floor_upcoming, chunk)
            samples["health"] += timed_calls(health, chunk)
        fire_times = statistics.median(len(direct_upcoming(i)) for i in ids[:20])
    served.stop()
    floor.stop()
    drop_embedded(url)

    q = {k: quantiles(v) for k, v in samples.items()}
    figures.update(
        {
            "schedules": args.schedules,
            "runs": args.runs,
            "history_rows": args.history,
            "requests": args.requests,
            "runs_requests": args.runs_requests,
            "health_p50_ms": round(q["health"]["p50_ms"], 2),
            "seed_s": round(seed_s, 2),
            "upcoming_fire_times_median": fire_times,
            "same_answers": same_runs and same_upcoming and same_floor,
        }
    )
    for name, key in (("runs", "runs"), ("upcoming", "up")):
        for side in ("api", "direct", "floor"):
            for stat in ("p50_ms", "p99_ms"):
                figures[f"{side}_{name}_{stat}"] = round(q[f"{side}_{key}"][stat], 3)
        for stat in ("p50", "p99"):
            figures[f"api_over_floor_{name}_{stat}"] = round(
                q[f"api_{key}"][f"{stat}_ms"] / q[f"floor_{key}"][f"{stat}_ms"], 2
            )
            figures[f"api_ratio_{name}_{stat}"] = round(
                q[f"api_{key}"][f"{stat}_ms"] / q[f"direct_{key}"][f"{stat}_ms"], 2
            )
    figures["api_runs_written_p50_ms"] = round(q["api_runs_written"]["p50_ms"], 3)
    figures["api_over_floor_runs_written_p50"] = round(
        q["api_runs_written"]["p50_ms"] / q["floor_runs"]["p50_ms"], 2
    )
    print_table(
        f"API vs direct ({args.runs_requests} runs, {args.requests} upcoming requests each, ms)",
        [
            (
                f"{name} {side} p50 / p99",
                f"{figures[f'{side}_{name}_p50_ms']:.2f} / {figures[f'{side}_{name}_p99_ms']:.2f}",
            )
            for name in ("runs", "upcoming")
            for side in ("api", "floor", "direct")
        ]
        + [
            (
                f"{name} API ÷ {over} p50 / p99",
                f"{figures[f'api_{key}_{name}_p50']} / {figures[f'api_{key}_{name}_p99']}",
            )
            for name in ("runs", "upcoming")
            for key, over in (("over_floor", "floor (target ≤ 1.5)"), ("ratio", "direct"))
        ]
        + [
            (
                "runs API ÷ floor p50, a run written before each",
                figures["api_over_floor_runs_written_p50"],
            ),
            ("GET /health p50 (HTTP floor)", figures["health_p50_ms"]),
            ("same answers", figures["same_answers"]),
            ("seeding (s)", figures["seed_s"]),
        ],
    )


def floor_app(answers: dict[str, bytes]) -> Any:
    """The framework's floor: a bare FastAPI app whose sync routes (sync as the API's are, so
    the thread-pool hop counts on both sides) answer bytes computed beforehand. No token, no
    store, no validation, no encoding: routing, the hop and HTTP only."""
    from fastapi import FastAPI, Response

    app = FastAPI()

    @app.get("/runs")
    def runs() -> Response:
        return Response(answers["runs"], media_type="application/json")

    @app.get("/upcoming/{schedule_id}")
    def upcoming(schedule_id: str) -> Response:
        return Response(answers[schedule_id], media_type="application/json")

    return app


# -- (3): standalone data directory -----------------------------------------------------------


UNAUTH_BODY_BYTES = 200 * 1024 * 1024


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def _send_unauth_body(url: str, answer: list[str]) -> None:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=60) as sock:
        sock.sendall(
            f"POST /v1/imports?format=csv HTTP/1.1\r\nHost: {host}\r\n"
            f"Content-Type: text/csv\r\nContent-Length: {UNAUTH_BODY_BYTES}\r\n\r\n".encode()
        )
        block = b"x" * (1024 * 1024)
        try:
            for _ in range(UNAUTH_BODY_BYTES // len(block)):
                sock.sendall(block)
        except OSError:
            pass  # answered and closed: the rest was never read
        try:
            answer.append(sock.recv(200).decode(errors="replace").split("\r\n")[0])
        except OSError:
            answer.append("")


def unauth_body_growth(url: str, pid: int) -> tuple[float, int | None]:
    """The server's RSS growth in MB (peak over start) under one unauthenticated 200 MB body,
    and the status it answered."""
    start = peak = rss_bytes(pid)
    answer: list[str] = []
    sender = threading.Thread(target=_send_unauth_body, args=(url, answer))
    sender.start()
    while sender.is_alive():
        peak = max(peak, rss_bytes(pid))
        sender.join(timeout=0.005)
    peak = max(peak, rss_bytes(pid))
    words = (answer[0] if answer else "").split()
    status = int(words[1]) if len(words) > 1 and words[1].isdigit() else None
    return round((peak - start) / 1e6, 1), status


def start_standalone(root: Path, timeout_s: float) -> tuple[float, float, int, int, tuple]:
    """Seconds from spawn to the API answering GET /health (its URL read from api.json, which
    is written once uvicorn listens, after the snapshot was loaded), with any status: the
    /health check of the store answers 503 whatever its state, see the README. Then seconds
    from SIGTERM to the process gone, the /health status and the status of GET /v1/runs with
    the local token api.json holds."""
    from crawlsched.resources.secrets import generate_key
    from crawlsched.standalone.datadir import read_api

    env = {
        **os.environ,
        "CRAWLSCHED_DATA_DIR": str(root),
        "CRAWLSCHED_API_PORT": "0",
        "CRAWLSCHED_SECRET_KEY": generate_key(),
        "CRAWLSCHED_LOG_LEVEL": "WARNING",
    }
    crawlsched = Path(sys.executable).with_name("crawlsched")
    command = (
        [str(crawlsched)]
        if crawlsched.exists()
        else [sys.executable, "-c", "from crawlsched.main import main; main()"]
    )
    log_path = root.parent / "standalone.log"  # a file: a full pipe would block the server
    log = log_path.open("wb")
    started = time.perf_counter()
    process = subprocess.Popen(
        [*command, "standalone"],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + timeout_s
        up = None
        while up is None:
            if process.poll() is not None:
                raise RuntimeError(f"standalone ended: {log_path.read_text()[-2000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError("standalone did not answer /health in time")
            api = read_api(root)
            if api:
                try:
                    health_status = httpx.get(f"{api['url']}/health", timeout=30).status_code
                    up = time.perf_counter() - started
                except httpx.HTTPError:
                    pass
            if up is None:
                time.sleep(0.02)
        runs_status = httpx.get(
            f"{api['url']}/v1/runs",
            params={"limit": 1},
            headers={"Authorization": f"Bearer {api['token']}"},
            timeout=30,
        ).status_code
        unauth = unauth_body_growth(api["url"], process.pid)
        stopping = time.perf_counter()
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=timeout_s)
        return up, time.perf_counter() - stopping, health_status, runs_status, unauth
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        log.close()


def bench_datadir(args: argparse.Namespace, figures: dict[str, Any]) -> None:
    from crawlsched.standalone.datadir import DataDir
    from crawlsched.store.client import drop_embedded, open_database

    url = f"mongomock://bench-api-jobs-{os.getpid()}"
    rt = make_runtime(url)
    rt.create_indexes()
    now = datetime.now(UTC)
    docs = job_docs(args.jobs, bench_reference(), now)
    rt.db.profiles.insert_many([dict(d) for d in docs])

    _, encode_s = clock(lambda: [bson.encode(d) for d in docs])

    insert_url = "mongomock://bench-insert"
    drop_embedded(insert_url)
    fresh = open_database(insert_url, "crawlsched")
    copies = [dict(d) for d in docs]
    _, insert_s = clock(fresh.profiles.insert_many, copies)
    drop_embedded(insert_url)

    with tempfile.TemporaryDirectory(prefix="bench-api-") as tmp:
        root = Path(tmp) / "data"
        data = DataDir(root, "crawlsched")
        first, snapshot_s = clock(data.snapshot, rt.db)
        second, resnapshot_s = clock(data.snapshot, rt.db)
        size = sum(f.stat().st_size for f in (root / "current" / "crawlsched").iterdir())

        drop_embedded("mongomock://bench-load")
        target = open_database("mongomock://bench-load", "crawlsched")
        loaded, load_s = clock(DataDir(root, "crawlsched").load_into, target)
        drop_embedded("mongomock://bench-load")
        drop_embedded(url)
        assert loaded["loaded"].get("profiles") == args.jobs, loaded["loaded"]

        _, python_start_s = clock(
            subprocess.run, [sys.executable, "-c", "import crawlsched.api"], check=True
        )
        start_s = stop_s = health_status = runs_status = unauth = None
        if args.standalone_process:
            start_s, stop_s, health_status, runs_status, unauth = start_standalone(
                root, args.timeout
            )

    figures.update(
        {
            "jobs": args.jobs,
            "snapshot_mb": round(size / 1e6, 1),
            "snapshot_collections": len(first.written),
            "resnapshot_linked": len(second.linked),
            "resnapshot_written": second.written,
            "encode_s": round(encode_s, 3),
            "insert_s": round(insert_s, 3),
            "snapshot_s": round(snapshot_s, 3),
            "resnapshot_s": round(resnapshot_s, 4),
            "load_s": round(load_s, 3),
            "python_start_s": round(python_start_s, 3),
            "snapshot_ratio": round(snapshot_s / encode_s, 2),
            "resnapshot_ratio": round(resnapshot_s / snapshot_s, 4),
            "load_ratio": round(load_s / insert_s, 2),
        }
    )
    if start_s is not None:
        figures["standalone_start_s"] = round(start_s, 3)
        figures["standalone_stop_s"] = round(stop_s, 3)
        figures["standalone_health_status"] = health_status
        figures["standalone_local_token_status"] = runs_status
        figures["start_ratio"] = round(start_s / (python_start_s + load_s), 2)
        figures["unauth_body_growth_mb"], figures["unauth_body_status"] = unauth
    print_table(
        f"standalone data directory ({args.jobs} jobs in profiles)",
        [
            (k, figures[k])
            for k in (
                "snapshot_mb",
                "encode_s",
                "snapshot_s",
                "snapshot_ratio",
                "resnapshot_s",
                "resnapshot_ratio",
                "resnapshot_written",
                "insert_s",
                "load_s",
                "load_ratio",
                "python_start_s",
                "standalone_start_s",
                "standalone_stop_s",
                "start_ratio",
                "standalone_health_status",
                "standalone_local_token_status",
                "unauth_body_growth_mb",
                "unauth_body_status",
            )
            if k in figures
        ],
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--schedules", type=int, default=None, help="default 10,000")
    parser.add_argument("--runs", type=int, default=None, help="default 100,000")
    parser.add_argument("--history", type=int, default=None, help="default: as many as runs")
    parser.add_argument("--jobs", type=int, default=None, help="default 100,000")
    parser.add_argument(
        "--requests", type=int, default=None, help="upcoming requests, each side (default 200)"
    )
    parser.add_argument(
        "--runs-requests", type=int, default=None, help="GET /v1/runs, each side (default 40)"
    )
    parser.add_argument("--quick", action="store_true", help="small sizes, under a minute")
    parser.add_argument(
        "--no-standalone-process",
        dest="standalone_process",
        action="store_false",
        help="skip starting `crawlsched standalone` as a subprocess",
    )
    parser.add_argument("--timeout", type=float, default=600, help="per subprocess wait (s)")
    args = parser.parse_args()
    defaults = (
        {"schedules": 1_000, "runs": 10_000, "jobs": 10_000, "requests": 50, "runs_requests": 20}
        if args.quick
        else {
            "schedules": 10_000,
            "runs": 100_000,
            "jobs": 100_000,
            "requests": 200,
            "runs_requests": 40,
        }
    )
    for key, value in defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if args.history is None:
        args.history = args.runs

    import logging

    logging.getLogger("crawlsched").setLevel(logging.WARNING)
    figures: dict[str, Any] = {"quick": args.quick}
    bench_queries(args, figures)
    bench_datadir(args, figures)
    print(json.dumps(figures, default=str))
    return 0 if figures["same_answers"] else 1


if __name__ == "__main__":
    sys.exit(main())

"""Soak: the same site recrawled run after run on `crawlsched standalone` with short retention;
the server's memory and its snapshot must stop growing once retention catches up. See
benchmarks/README.md (bench_soak.py) for what each figure means.

    .venv/bin/python benchmarks/bench_soak.py [--runs 50] [--early 10] [--pages 300]
        [--retain 5] [--sweep 1] [--run-timeout 600]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx  # noqa: E402
import yaml  # noqa: E402

from crawlsched.reference import load_reference  # noqa: E402
from tests.support import scratch  # noqa: E402
from tests.support.link_graph import GraphSite, layered_graph  # noqa: E402
from tests.support.standalone import Standalone, standalone_env  # noqa: E402
from tests.support.waiting import wait_for  # noqa: E402

SCHEDULE = "soak"
# What a run leaves that retention removes; grows with the run count without it.
KINDS = ("discovered", "history", "activity", "deliveries", "idempotency")
LIMIT = 1.2


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=50, help="runs in all")
    parser.add_argument("--early", type=int, default=10, help="the run the ratios divide by")
    parser.add_argument("--pages", type=int, default=300, help="pages of the site")
    parser.add_argument("--retain", type=float, default=5, help="seconds every kind is kept")
    parser.add_argument("--sweep", type=float, default=1, help="seconds between TTL sweeps")
    parser.add_argument("--run-timeout", type=float, default=600, help="seconds per run")
    args = parser.parse_args(argv)
    if not 1 <= args.early < args.runs or args.pages < 2 or args.retain < 1 or args.sweep <= 0:
        parser.error("need 1 <= --early < --runs, --pages >= 2, --retain >= 1, --sweep > 0")
    return args


def rss_bytes(pid: int) -> int:
    """The process's resident set (Linux: /proc/PID/status, VmRSS in kB)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def snapshot_bytes(data_dir: Path) -> int:
    """Bytes of the current snapshot (every file of it, hard-linked ones included)."""
    current = (data_dir / "current").resolve()
    return sum(p.stat().st_size for p in current.rglob("*") if p.is_file())


def collection_bytes(data_dir: Path) -> dict[str, int]:
    """Bytes of each collection's documents in the current snapshot (its .bson file)."""
    current = (data_dir / "current").resolve()
    return {p.stem: p.stat().st_size for p in sorted(current.rglob("*.bson"))}


class Api:
    def __init__(self, server: Standalone) -> None:
        api = json.loads((server.data_dir / "api.json").read_text())
        headers = {"Authorization": f"Bearer {api['token']}"}
        self.client = httpx.Client(base_url=api["url"], headers=headers, timeout=60)

    def run_now(self) -> str:
        # An idempotency key per run: those are kept (for --retain) too.
        headers = {"Idempotency-Key": uuid.uuid4().hex}
        response = self.client.post("/v1/runs", json={"schedule_id": SCHEDULE}, headers=headers)
        response.raise_for_status()
        return response.json()["run_id"]

    def run(self, run_id: str) -> dict | None:
        response = self.client.get(f"/v1/runs/{run_id}")
        return response.json() if response.status_code == 200 else None

    def stats(self) -> dict:
        return self.client.get("/v1/stats").raise_for_status().json()


def measure(server: Standalone, api: Api, args: argparse.Namespace) -> dict:
    """Once what the last run left has expired and a snapshot has been written since."""
    time.sleep(
        args.retain + 3 * args.sweep + 3 * float(server.env["CRAWLSCHED_SNAPSHOT_INTERVAL_S"])
    )
    stats = api.stats()
    return {
        "rss_bytes": rss_bytes(server.process.pid),
        "snapshot_bytes": snapshot_bytes(server.data_dir),
        "collection_bytes": collection_bytes(server.data_dir),
        "job_documents": sum(sum(v.values()) for v in stats["jobs_by_state"].values()),
        "history_rows": sum(stats["executions_by_outcome"].values()),
        "events": sum(stats["events_by_name"].values()),
        "deliveries": sum(stats["webhooks_by_state"].values()),
    }


def fixed_interval_reference(path: Path) -> Path:
    """The packaged reference with `web` recrawled at the job's own interval (its adaptive
    recrawl waits an hour at least): every run of the soak crawls the whole site."""
    data = load_reference().model_dump(mode="json")
    for media in data["media"]:
        if media["name"] == "web":
            media["recrawl"] = None
    path.write_text(yaml.safe_dump(data))
    return path


def soak(args: argparse.Namespace, workdir: Path) -> dict:
    retain = str(args.retain)
    env = standalone_env(
        workdir / "data",
        CRAWLSCHED_REFERENCE_FILE=str(fixed_interval_reference(workdir / "reference.yaml")),
        CRAWLSCHED_CRAWL_MAX_DEPTH="100",
        CRAWLSCHED_HOST_CONCURRENCY="4",
        CRAWLSCHED_LOG_LEVEL="ERROR",
        CRAWLSCHED_TTL_SWEEP_S=str(args.sweep),
        **{f"CRAWLSCHED_RETAIN_{kind.upper()}_S": retain for kind in KINDS},
    )
    graph = layered_graph(args.pages, seed=1)
    figures: dict[int, dict] = {}
    durations = []
    with GraphSite(graph) as site, Standalone(env) as server:
        start = f"{site.base_url}/p/0"
        server.cli("jobs", "add", "website", start, "--interval", "1")  # due again each run
        server.cli(
            "schedules", "add", SCHEDULE, "--every", "86400",
            "--target-collection", "websites", "--target", start,
        )  # fmt: skip
        api = Api(server)
        for n in range(1, args.runs + 1):
            began = time.perf_counter()
            run_id = api.run_now()
            run = wait_for(
                lambda run_id=run_id: (r := api.run(run_id)) and r["state"] == "finished" and r,
                args.run_timeout,
                f"run {n} to end",
                interval=0.2,
            )
            durations.append(time.perf_counter() - began)
            if run.get("discovered") != args.pages - 1 or run["result"] != "succeeded":
                raise SystemExit(f"run {n} is not a whole crawl: {json.dumps(run)[:1500]}")
            print(f"run {n:3d}: {durations[-1]:5.1f} s, {run.get('discovered')} discovered")
            if n in (args.early, args.runs):
                figures[n] = measure(server, api, args)
                print(f"after run {n}: {figures[n]}")
        api.client.close()
    early, late = figures[args.early], figures[args.runs]
    rss_ratio = late["rss_bytes"] / early["rss_bytes"]
    snapshot_ratio = late["snapshot_bytes"] / early["snapshot_bytes"]
    return {
        "bench": "soak",
        "runs": args.runs,
        "early_run": args.early,
        "pages": args.pages,
        "retain_s": args.retain,
        "rss_ratio": round(rss_ratio, 3),
        "snapshot_ratio": round(snapshot_ratio, 3),
        "soak_growth": round(max(rss_ratio, snapshot_ratio), 3),
        "within_limit": max(rss_ratio, snapshot_ratio) <= LIMIT,
        "median_run_s": round(sorted(durations)[len(durations) // 2], 2),
        "early": early,
        "late": late,
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="bench-soak-"))
    try:
        result = soak(args, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        scratch.cleanup(keep=False)  # the server's logs (tests/support/scratch.py)
    print(
        f"\nRSS after run {args.runs} / after run {args.early}: {result['rss_ratio']}; "
        f"snapshot: {result['snapshot_ratio']} (limit {LIMIT})"
    )
    print(json.dumps(result))
    return 0 if result["within_limit"] else 1


if __name__ == "__main__":
    sys.exit(main())

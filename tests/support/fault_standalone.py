"""One crawl of a served link graph on `crawlsched standalone`, with a `kill -9` of the server
at a chosen moment and a restart on the same data directory; then the checks of
`fault_checks` on what the data directory holds after a clean stop.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from crawlsched.runtime import Runtime
from crawlsched.schedules.spec import NOTIFY_EVENTS
from crawlsched.settings import Settings
from crawlsched.standalone.datadir import DataDir
from crawlsched.store.client import drop_embedded
from tests.support.fault_checks import (
    PLANNED_MARKER,
    ROBOTS,
    RUNNING,
    RunCheck,
    check_run,
    jobs_by_path,
    unix_time,
)
from tests.support.link_graph import GraphSite, LinkGraph
from tests.support.standalone import Standalone, standalone_env
from tests.support.waiting import wait_for
from tests.support.webhook_receiver import WebhookReceiver

SCHEDULE = "faults"
# Links followed to any depth, quick tries again after a machinery failure, and enough
# requests at once to the one host.
FAST_RECOVERY = {
    "CRAWLSCHED_CRAWL_MAX_DEPTH": "100",
    "CRAWLSCHED_REDO_BACKOFF_S": "0.5",
    "CRAWLSCHED_HOST_CONCURRENCY": "4",
    "CRAWLSCHED_LOG_LEVEL": "ERROR",
}

# When to kill: asked with the site and the seconds since `run now`; True means now.
Moment = Callable[[GraphSite, float], bool]


@dataclass
class TrialOutcome:
    check: RunCheck
    started_at: float  # unix time of `run now`
    fault_at: float | None  # unix time of the kill, None for an uninterrupted run
    ended_at: float  # the run's finished_at
    # The run's counts read through the API just before the kill, and just after the restart.
    counts_at_kill: dict | None = None
    counts_after_restart: dict | None = None
    # The pages whose job had ended in the data directory the kill left (its last snapshot
    # and journal): what the restart starts from.
    ended_at_kill: set[str] | None = None
    fetches: Counter[str] = field(default_factory=Counter)  # GETs per path, robots.txt aside
    # A SIGTERMed worker group (`worker_term`): seconds from the signal to its exit, its code.
    drain_s: float | None = None
    drain_exit: int | None = None

    @property
    def refetched_after_ending(self) -> int | None:
        """Fetches beyond the first of pages whose end the kill's data directory held: the
        store lost their end (what the journal is for). The rest of `fetched_twice` are
        pages fetched but not yet recorded by their batch when it was killed. None where no
        data directory was read (no kill, or a distributed trial)."""
        if self.ended_at_kill is None:
            return None
        ended = self.ended_at_kill
        return sum(n - 1 for path, n in self.fetches.items() if n > 1 and path in ended)

    @property
    def duration_s(self) -> float:
        return self.ended_at - self.started_at

    @property
    def recovery_s(self) -> float | None:
        return None if self.fault_at is None else self.ended_at - self.fault_at


def after_fetches(n: int) -> Moment:
    return lambda site, _elapsed: len([p for _, p in site.access_log if p != "/robots.txt"]) >= n


def after_seconds(s: float) -> Moment:
    return lambda _site, elapsed: elapsed >= s


def _ended(server: Standalone, run_id: str) -> dict | None:
    try:
        run = server.get(f"/v1/runs/{run_id}")
    except Exception:  # a restart under way: ask again
        return None
    return run if run.get("state") in ("finished", "stopped") else None


def _delivered(hook: WebhookReceiver, run_id: str) -> bool:
    return any(p["body"].get("run_id") == run_id for p in hook.delivered())


def standalone_trial(
    workdir: Path,
    graph: LinkGraph,
    delay_s: float,
    kill_when: Moment | None,
    end_within_s: float = 600,
    **env: str,
) -> TrialOutcome:
    """Crawl `graph` from its start page; kill -9 the server once `kill_when` says so (never,
    when None), start it again, and check the run once it ended and its webhook arrived."""
    workdir.mkdir(parents=True, exist_ok=True)
    data = workdir / "data"
    settings_env = standalone_env(data, **{**FAST_RECOVERY, **env})
    fault_at = counts_at_kill = counts_after_restart = ended_at_kill = None
    with GraphSite(graph, delay_s=delay_s) as site, WebhookReceiver() as hook:
        server = Standalone(settings_env).start()
        try:
            notify = [a for event in NOTIFY_EVENTS for a in ("--notify-on", event)]
            server.crawl_site(SCHEDULE, f"{site.base_url}/p/0", "--webhook", hook.url, *notify)
            started_at = time.time()
            run_id = server.json_lines("run", "now", SCHEDULE)[0]["run_id"]
            if kill_when is not None:
                wait_for(
                    lambda: kill_when(site, time.time() - started_at) or _ended(server, run_id),
                    end_within_s,
                    "the moment to kill",
                    interval=0.02,
                )
                if _ended(server, run_id) is None:
                    counts_at_kill = server.get(f"/v1/runs/{run_id}").get("counts")
                    fault_at = time.time()
                    server.kill()
                    ended_at_kill = _ended_paths(data, site.base_url)
                    server.start()
                    counts_after_restart = server.get(f"/v1/runs/{run_id}").get("counts")
            wait_for(lambda: _ended(server, run_id), end_within_s, f"run {run_id} to end", 0.2)
            # The webhook may take a few tries; bounded, and a miss is reported, not raised.
            deadline = time.monotonic() + 60
            while not _delivered(hook, run_id) and time.monotonic() < deadline:
                time.sleep(0.2)
            server.stop()
        finally:
            server.kill()
        access_log = list(site.access_log)
        posts = list(hook.posts)
    check, ended_at = _check_data_dir(data, run_id, graph, site.base_url, access_log, posts)
    fetches = Counter(path for _, path in access_log if path != ROBOTS)
    return TrialOutcome(
        check, started_at, fault_at, ended_at, counts_at_kill, counts_after_restart,
        ended_at_kill, fetches,
    )  # fmt: skip


@contextmanager
def _loaded(data: Path) -> Iterator[Runtime]:
    """A stopped (or killed) server's data directory loaded into an embedded store."""
    url = f"mongomock://fault-check-{uuid.uuid4().hex[:8]}"
    rt = Runtime(Settings(mongo_url=url))
    try:
        DataDir(data, Settings.model_fields["mongo_db"].default).load_into(rt.db)
        yield rt
    finally:
        drop_embedded(url)


def _check_data_dir(data: Path, run_id: str, graph, base_url, access_log, posts):
    """Check the run in the stopped server's data directory."""
    with _loaded(data) as rt:
        check = check_run(rt.db, run_id, graph, base_url, access_log, None, posts)
        run = rt.db.runs.find_one({"_id": run_id}) or {}
        return check, unix_time(run.get("finished_at")) or time.time()


def _ended_paths(data: Path, base_url: str) -> set[str]:
    with _loaded(data) as rt:
        jobs = jobs_by_path(rt.db.websites, base_url)
    return {
        path
        for path, doc in jobs.items()
        if doc.get("state") != RUNNING and doc.get("last_outcome") not in (None, PLANNED_MARKER)
    }

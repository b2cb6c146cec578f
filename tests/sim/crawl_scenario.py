"""The crawl core's scenario: a run over a simulated web, crawled by the project's real ticker,
planner, gatekeepers, crawl loop and coordinator in simulated worker processes that crash
between store writes (and at sends and acks) and come back; then the checks of
`crawl_checks`.

    PYTHONHASHSEED=0 .venv/bin/python -m tests.sim --scenario crawl --seed 7
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any

import httpx
from mongomock import aggregate as mongomock_aggregate

from crawlsched.catalog import JobState
from crawlsched.environment import SYSTEM
from crawlsched.logs import configure_logging
from crawlsched.planning.run_names import ENDED
from crawlsched.politeness.reservations import LATE_START_GRACE
from crawlsched.reference import MediaRow, ReferenceData, TaskRow
from crawlsched.runtime import Runtime
from crawlsched.schedules.spec import build_schedule
from crawlsched.settings import Settings
from crawlsched.store.client import drop_embedded
from crawlsched.store.embedded.ttl import sweep_expired
from tests.sim import crawl_checks
from tests.sim.broker import SimBroker
from tests.sim.crawl_world import HOOKS_HOST, SimCluster
from tests.sim.env import SimCounter
from tests.sim.ids import seeded_uuids
from tests.sim.scenarios import START, ScenarioResult
from tests.sim.web import SimWeb
from tests.sim.web_graph import WebSpec
from tests.sim.world import CrashPolicy, World

SCHEDULE = "sim"
SECRET_KEY = "bU-rMPNa7ShuGWVfxX8viTUi8T-KfPs5RCZiEz9Yqo8="  # seals the webhook's URL at rest
REFUSALS_ALLOWED = 3  # a page its host answers 429/503 this often is given up
SWEEP_S = 30.0  # the store's TTL sweep runs this often (virtual seconds)
SETTLE_S = 120.0  # after the run is announced: slices and leases run out meanwhile
MEDIA = MediaRow(
    name="simweb",
    id=901,
    driver_class="http",
    used_tool="httpx",
    max_depth=1000,
    max_pages=100_000,
    tasks={"article": TaskRow(need_login=False, need_selenium=False, crawl_limit=1000,
                              batch_limit=8)},
)  # fmt: skip


@dataclass(frozen=True)
class CrawlSpec:
    """One scenario's shape (its seed draws the rest)."""

    processes: int = 3
    threads: int = 2
    web: WebSpec = field(default_factory=lambda: WebSpec(hosts=3, pages_per_host=10, depth=3))
    crash_p: float = 0.01
    crash_budget: int = 3
    duplicate_p: float = 0.03
    host_delay_s: float = 1.0
    lanes: int = 2
    max_virtual_s: float = 6 * 3600.0
    max_steps: int = 2_000_000
    drains: int = 0  # worker processes told to stop (SIGTERM) at moments drawn from the seed
    drain_within_s: float = 30.0  # ... within this many virtual seconds of the start


def settings_of(seed: int, spec: CrawlSpec) -> Settings:
    return Settings(
        mongo_url=f"mongomock://sim-{seed}",
        broker_url="stub://",
        log_level="error",
        secret_key=SECRET_KEY,
        host_delay_s=spec.host_delay_s,
        host_concurrency=1,
        crawl_lanes=spec.lanes,
        host_refusals_per_page=REFUSALS_ALLOWED,
        clock_interval_s=5.0,
        # Short retention: the TTL sweep deletes things during the run, so a sweep of
        # something still owed is seen.
        retain_activity_s=60.0,
        retain_deliveries_s=60.0,
        retain_discovered_s=60.0,
        retain_history_s=60.0,
    )


class Hooks(httpx.BaseTransport):
    """The web, and the run's webhook receiver on `hooks.sim` (which sometimes answers 500)."""

    def __init__(self, web: SimWeb, world: World, db: Any) -> None:
        self.web, self.world, self.db = web, world, db
        self.rng = world.rng("hooks")
        self.posts: list[tuple[str, bool]] = []  # (delivery id, posted after it was delivered)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.host != HOOKS_HOST:
            return self.web.transport.handle_request(request)
        delivery = request.headers.get("idempotency-key", "")
        doc = self.db.webhook_deliveries.find_one({"_id": delivery}) or {}
        self.posts.append((delivery, doc.get("state") == "delivered"))
        self.world.sleep(0.05)
        return httpx.Response(500 if self.rng.random() < 0.3 else 200, request=request)


def _seed_store(settings: Settings, world: World, web: SimWeb) -> Runtime:
    """The reference rows, the seed jobs and a schedule that fires once, a second in (written
    from outside the simulated processes: counted, never crashed)."""
    rt = Runtime(settings, SimCounter(world), env=SYSTEM, clock=world.now)
    rt.create_indexes()
    rt.reference.load(ReferenceData(models=["article"], media=[MEDIA]))
    jobs = [
        {
            "target": url,
            "media_name": MEDIA.name,
            "media_name_id": MEDIA.id,
            "task": "article",
            "state": int(JobState.PENDING),
            "enabled": True,
            "execution_date": START - timedelta(seconds=1),
            "attempt_count": 0,
            "modified_at": START,
            "created_at": START,
        }
        for url in web.seeds()
    ]
    rt.jobs("websites").insert_new(jobs)
    given = {
        "at": START + timedelta(seconds=1),
        "target_collection": "websites",
        "targets": web.seeds(),
        "webhook": f"http://{HOOKS_HOST}/run-ended",
    }
    schedule = build_schedule(SCHEDULE, given, START)
    url = schedule["notify"]["webhook"].pop("url")  # sealed at rest, as `schedules add` does
    schedule["notify"]["webhook"]["secret"] = rt.secrets.encrypt(url)
    rt.schedules.insert(schedule)
    return rt


def crawl(seed: int, spec: CrawlSpec | None = None) -> ScenarioResult:
    spec = spec or CrawlSpec()
    configure_logging("json", "CRITICAL")  # thousands of simulated crashes say a lot
    settings = settings_of(seed, spec)
    drop_embedded(settings.mongo_url)
    # The embedded store draws `$sample` from a random source of its own: seeded too.
    mongomock_aggregate._random.seed(f"{seed}:sample")
    workers = tuple(f"worker-{n}" for n in range(spec.processes))
    policy = CrashPolicy(spec.crash_p, spec.crash_budget, frozenset({"write", "send", "ack"}),
                         workers)  # fmt: skip
    world = World(seed, START, policy)
    web = SimWeb(world, seed, spec.web)
    try:
        with world, seeded_uuids(world):
            return _run(seed, spec, settings, world, web)
    finally:
        drop_embedded(settings.mongo_url)


def _run(
    seed: int, spec: CrawlSpec, settings: Settings, world: World, web: SimWeb
) -> ScenarioResult:
    setup = _seed_store(settings, world, web)
    db = setup.db.raw
    hooks = Hooks(web, world, db)
    broker = SimBroker(world, duplicate_p=spec.duplicate_p)
    cluster = SimCluster(world, web, broker, settings, spec.processes, spec.threads, hooks,
                         drains=spec.drains > 0)  # fmt: skip
    cluster.start()
    draw = world.rng("drains")
    for _ in range(spec.drains):
        process = draw.choice(cluster.processes)
        world.call_later(draw.uniform(0.5, spec.drain_within_s),
                         lambda process=process: cluster.drain(process))  # fmt: skip
    swept: list[str] = []
    world.spawn(world.process("store"), lambda: _sweeper(world, db, swept), "ttl", daemon=True)

    def announced() -> bool:
        run = db.runs.find_one({"schedule_id": SCHEDULE})
        return run is not None and run.get("state") in ENDED and "announce" not in run

    summary = world.run(
        announced, max_virtual_s=spec.max_virtual_s, max_steps=spec.max_steps, check=False
    )
    violations = [] if summary.reason == "until" else [summary.report()]
    if not violations:
        # What the run's end must show, read at the end (its pages expire a minute after it).
        run = db.runs.find_one({"schedule_id": SCHEDULE})
        # A crash or a duplicate delivery may lose a refusal a batch had counted.
        strict = not world.crashes and not broker.totals()["duplicated"]
        violations += _at_the_end(db, run, web, strict)
        owed = [d["_id"] for d in db.webhook_deliveries.find({})]
        settled = world.elapsed + SETTLE_S
        after = world.run(
            lambda: world.elapsed >= settled,
            max_virtual_s=spec.max_virtual_s,
            max_steps=spec.max_steps,
            check=False,
        )
        if after.reason not in ("until", "quiescent"):
            violations.append(after.report())
        violations += _settled(db, run, web, world, spec, hooks, cluster, owed)
    violations += swept
    return ScenarioResult(
        seed, violations, world.steps, len(world.crashes), world.elapsed, summary.real_s,
        world.trace_hash(),
        {"requests": len(web.log), "published": len(cluster.publisher.published),
         "drained": len(cluster.drained),
         "drain_s_max": max((took for _, took in cluster.drained), default=None)},
    )  # fmt: skip


def _sweeper(world: World, db: Any, swept: list[str]) -> None:
    """The store's TTL sweep (MongoDB's TTL monitor, the standalone's sweep), checked first:
    nothing it deletes may still be owed."""
    while True:
        world.sleep(SWEEP_S)
        swept += crawl_checks.owed_swept(db, world.now())
        sweep_expired(db, world.now())


def _at_the_end(db: Any, run: dict[str, Any], web: SimWeb, strict: bool) -> list[str]:
    found = crawl_checks.run_ended_once(db, run, web, START)
    found += crawl_checks.pages_ended_once(db, run, web, REFUSALS_ALLOWED, strict)
    found += crawl_checks.fetched_once(web) if strict else []
    return found + crawl_checks.end_event_stored(db, run)


def _settled(db: Any, run: dict[str, Any], web: SimWeb, world: World, spec: CrawlSpec,
             hooks: Hooks, cluster: SimCluster, owed: list[str]) -> list[str]:  # fmt: skip
    grace = LATE_START_GRACE.total_seconds()
    found = crawl_checks.politeness(web, spec.host_delay_s, grace, world.crashes)
    found += crawl_checks.nothing_left_held(db, world.now())
    # A page in flight may wait for its host's delay and a robots.txt, each as slow as the
    # slowest answer; then the part is recorded.
    bound_s = 2 * spec.web.slow_latency_s[1] + 2 * spec.host_delay_s + 2.0
    found += crawl_checks.drains_bounded(cluster.drained, bound_s)
    return found + crawl_checks.announced(db, run, cluster.publisher.published, hooks.posts, owed)


def varied(seed: int) -> ScenarioResult:
    """The scenario's shape drawn from the seed too: processes, threads, lanes, the web's size,
    how often processes crash and messages come twice."""
    draw = random.Random(f"{seed}:shape")
    web = WebSpec(
        hosts=draw.randint(1, 4),
        pages_per_host=draw.randint(4, 16),
        depth=draw.randint(2, 4),
        fan_out=draw.randint(2, 4),
        cross_host_p=draw.choice([0.0, 0.2, 0.5]),
    )
    spec = CrawlSpec(
        processes=draw.randint(1, 4),
        threads=draw.randint(1, 3),
        web=web,
        crash_p=draw.choice([0.0, 0.01, 0.03, 0.06]),
        crash_budget=draw.randint(0, 6),
        duplicate_p=draw.choice([0.0, 0.03, 0.1]),
        host_delay_s=draw.choice([0.0, 0.5, 1.0, 2.0]),
        lanes=draw.randint(1, 3),
    )
    return crawl(seed, spec)


def small(seed: int) -> ScenarioResult:
    """Fewer pages and no crashes: what the scenario's checks say of a quiet crawl."""
    return crawl(seed, replace(CrawlSpec(), crash_p=0.0, crash_budget=0, duplicate_p=0.0))


def drained(seed: int) -> ScenarioResult:
    """Worker processes told to stop (SIGTERM) mid-crawl, 1 to 3 times, each started again
    once drained; no crash, no duplicate delivery: so every page must still be fetched once
    (a drain records what it fetched and gives back only what it did not)."""
    draw = random.Random(f"{seed}:drain-shape")
    web = WebSpec(
        hosts=draw.randint(1, 4),
        pages_per_host=draw.randint(6, 16),
        depth=draw.randint(2, 4),
        fan_out=draw.randint(2, 4),
        cross_host_p=draw.choice([0.0, 0.2, 0.5]),
    )
    spec = CrawlSpec(
        processes=draw.randint(2, 4),
        threads=draw.randint(1, 3),
        web=web,
        crash_p=0.0,
        crash_budget=0,
        duplicate_p=0.0,
        host_delay_s=draw.choice([0.0, 0.5, 1.0, 2.0]),
        lanes=draw.randint(1, 3),
        drains=draw.randint(1, 3),
        drain_within_s=draw.choice([5.0, 15.0, 30.0]),
    )
    return crawl(seed, spec)

"""A day of schedule firings against KEDA-scaled worker pools: a pure discrete-time model.

No dramatiq, no pymongo, no clock; used by bench_scaling.py, which measures the rates it is
given. Each step (`step_s`):

1. each schedule whose time has come fires: the jobs of its collection that are due (a job is
   due again `interval_s` after its batch finished, as `outcomes.after_success` sets it) are
   cut into batches by the planner's own `make_batches` (per task, category and media, under
   the media's `batch_limit`);
2. batches that need an account (per media) or a browser slot (one pool) wait for a free one,
   first come first served, holding it until the batch ends; the others, and admitted ones,
   are messages on their worker class's queue;
3. KEDA + HPA (`_keda_model`) see the class's queue: `ready` messages (what an AMQP trigger
   reads: not those prefetched by a running pod, dramatiq prefetching 2 x threads per pod) or
   `ready+unacked` (the management API's count);
4. new pods consume after `startup_s`; a pod removed while busy gives its batches' remaining
   jobs back to the head of the queue (workers drain on SIGTERM);
5. each free thread of a ready pod takes the next message; a batch of n jobs keeps its thread
   n / (jobs per second per thread) seconds.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from benchmarks import _keda_model as keda
from crawlsched.planning.batching import make_batches
from crawlsched.planning.due import Category, DueJob


@dataclass(frozen=True)
class JobGroup:
    """`count` jobs of one (collection, media, task), with the reference row's flags."""

    collection: str
    media: str
    media_id: int
    task: str
    need_login: bool
    need_selenium: bool
    batch_limit: int | None
    count: int
    interval_s: float

    @property
    def worker_class(self) -> str:
        return "browser" if self.need_selenium else "http"


@dataclass(frozen=True)
class WorkerClass:
    name: str
    rule: keda.KedaRule
    threads: int
    jobs_per_s_per_thread: float
    startup_s: float
    metric: str = "ready"  # or "ready+unacked"

    def __post_init__(self) -> None:
        if self.threads < 1:
            raise ValueError(f"threads must be >= 1, got {self.threads}")
        if not self.jobs_per_s_per_thread > 0:
            raise ValueError(f"jobs_per_s_per_thread must be > 0, got {self.jobs_per_s_per_thread}")
        if self.metric not in ("ready", "ready+unacked"):
            raise ValueError(f"metric must be ready or ready+unacked, got {self.metric!r}")


@dataclass
class SimBatch:
    run: tuple[str, float]
    group: JobGroup
    size: int  # jobs it carries
    left: float  # jobs not crawled yet


@dataclass
class Pod:
    ready_at: float
    busy: list[SimBatch] = field(default_factory=list)


@dataclass
class RunRecord:
    fired_at: float
    jobs: int = 0
    open_batches: dict[str, int] = field(default_factory=dict)
    first_start: dict[str, float] = field(default_factory=dict)
    done_at: dict[str, float] = field(default_factory=dict)


@dataclass
class ClassState:
    spec: WorkerClass
    scaler: keda.ScalerState
    pods: list[Pod]
    queue: deque[SimBatch] = field(default_factory=deque)
    pod_seconds: float = 0.0
    replicas: list[tuple[float, int]] = field(default_factory=list)


def _due_jobs(group: JobGroup, n: int) -> list[DueJob]:
    return [
        DueJob(
            id=i, target=f"{group.media}_{i}", media_name=group.media, media_id=group.media_id,
            driver_class="-", used_tool="-", need_login=group.need_login,
            need_selenium=group.need_selenium, crawl_limit=1, batch_limit=group.batch_limit,
        )
        for i in range(n)
    ]  # fmt: skip


def plan(due: dict[JobGroup, int], default_limit: int) -> list[tuple[JobGroup, int]]:
    """(group, jobs) per batch, cut by the planner's make_batches for each task."""
    out = []
    tasks = {(g.collection, g.task) for g in due}
    for collection, task in sorted(tasks):
        groups = {g.media: g for g in due if (g.collection, g.task) == (collection, task)}
        categorized: dict[Category, list[DueJob]] = {}
        for g in groups.values():
            categorized.setdefault(Category.of(g.need_login, g.need_selenium), []).extend(
                _due_jobs(g, due[g])
            )
        for batch in make_batches(collection, task, categorized, default_limit):
            out.append((groups[batch.media_name], len(batch.job_ids)))
    return out


def simulate(
    groups: list[JobGroup],
    sweeps: dict[str, float],
    classes: dict[str, WorkerClass],
    accounts: dict[str, int],
    browser_slots: int,
    duration_s: float,
    step_s: float = 5.0,
    default_limit: int = 100,
) -> dict[str, Any]:
    """Replay `duration_s` of firings (`sweeps`: collection -> interval) and return the runs,
    the replicas over time and the pod-seconds of each class."""
    states = {
        name: ClassState(
            spec, keda.initial_state(spec.rule), [Pod(0.0) for _ in range(spec.rule.min_replicas)]
        )
        for name, spec in classes.items()
    }
    cohorts: list[tuple[float, JobGroup, int]] = [(0.0, g, g.count) for g in groups]
    waiting: deque[SimBatch] = deque()  # for an account or a browser slot
    free_accounts = dict(accounts)
    free_slots = browser_slots
    runs: dict[tuple[str, float], RunRecord] = {}
    steps = math.ceil(duration_s / step_s)
    for i in range(steps):
        now = i * step_s
        # 1. Firings.
        for collection, interval in sweeps.items():
            if now % interval >= step_s:
                continue
            due: dict[JobGroup, int] = {}
            kept = []
            for at, g, n in cohorts:
                if g.collection == collection and at <= now:
                    due[g] = due.get(g, 0) + n
                else:
                    kept.append((at, g, n))
            cohorts = kept
            key = (collection, now)
            record = runs.setdefault(key, RunRecord(now))
            for g, n in plan(due, default_limit):
                batch = SimBatch(key, g, n, float(n))
                record.jobs += n
                cls = g.worker_class
                record.open_batches[cls] = record.open_batches.get(cls, 0) + 1
                needs = g.need_login or g.need_selenium
                (waiting if needs else states[cls].queue).append(batch)
        # 2. Admission, first come first served.
        for batch in list(waiting):
            g = batch.group
            if g.need_login and free_accounts.get(g.media, 0) < 1:
                continue
            if g.need_selenium and free_slots < 1:
                continue
            if g.need_login:
                free_accounts[g.media] -= 1
            if g.need_selenium:
                free_slots -= 1
            waiting.remove(batch)
            states[g.worker_class].queue.append(batch)
        for name, st in states.items():
            spec = st.spec
            # 3. KEDA sees the queue.
            ready_pods = [p for p in st.pods if p.ready_at <= now]
            running = sum(len(p.busy) for p in ready_pods)
            if spec.metric == "ready":
                prefetch_room = len(ready_pods) * 2 * spec.threads - running
                metric = max(0, len(st.queue) - max(prefetch_room, 0))
            else:
                metric = len(st.queue) + running
            st.scaler, _ = keda.step(st.scaler, now, metric, spec.rule)
            # 4. Pods follow the replica count: new ones start, removed ones give work back.
            target = st.scaler.replicas
            while len(st.pods) < target:
                st.pods.append(Pod(now + spec.startup_s))
            while len(st.pods) > target:
                starting = [p for p in st.pods if p.ready_at > now]
                pod = starting[-1] if starting else st.pods[-1]
                st.pods.remove(pod)
                for batch in reversed(pod.busy):
                    st.queue.appendleft(batch)
            st.replicas.append((now, target))
            st.pod_seconds += target * step_s
            # 5. Free threads take messages, then work for one step.
            for pod in st.pods:
                if pod.ready_at > now:
                    continue
                while len(pod.busy) < spec.threads and st.queue:
                    batch = st.queue.popleft()
                    record = runs[batch.run]
                    record.first_start.setdefault(name, now)
                    pod.busy.append(batch)
                budget = spec.jobs_per_s_per_thread * step_s
                for batch in list(pod.busy):
                    if batch.left > budget:
                        batch.left -= budget
                        continue
                    finished = now + batch.left / spec.jobs_per_s_per_thread
                    pod.busy.remove(batch)
                    g = batch.group
                    if g.need_login:
                        free_accounts[g.media] += 1
                    if g.need_selenium:
                        free_slots += 1
                    cohorts.append((finished + g.interval_s, g, batch.size))
                    record = runs[batch.run]
                    record.open_batches[name] -= 1
                    if record.open_batches[name] == 0:
                        record.done_at[name] = finished
    return {"runs": list(runs.values()), "classes": states, "end_s": steps * step_s}

"""One crawl of a served link graph on the distributed path: `dramatiq` CLI workers and a
`crawlsched clock` on RabbitMQ (one node, or a three-node cluster on quorum queues) and the
multi-process MongoDB server, with one fault at a chosen moment:

- `worker`: SIGKILL of the worker process group, then a new group;
- `worker_term`: SIGTERM to the group's main process, as Kubernetes sends it to a container's
  first process: it drains; once it has exited, a new group;
- `clock`: SIGKILL of the clock process, then a new one;
- `rabbit_node`: SIGKILL of the cluster node that leads the crawl queue (started again after
  the run, for the next trial);
- `rabbit_stop`: the same node stopped gracefully (`rabbitmqctl stop_app`; started again after
  the run);
- `mongo_cut`: the workers' connection to MongoDB (through a TcpProxy) cut for `outage_s`.

The run's end event is read from a queue bound to `run.#` on the events exchange, its webhook
from a local receiver; then the checks of `fault_checks`.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pika
import pymongo

from crawlsched.catalog import JobState
from crawlsched.events import EXCHANGE
from crawlsched.runtime import Runtime
from crawlsched.schedules.spec import NOTIFY_EVENTS
from crawlsched.settings import Settings, split_broker_urls
from tests.support.fault_checks import END_EVENTS, check_run, unix_time
from tests.support.fault_standalone import Moment, TrialOutcome
from tests.support.graph_run import add_graph_schedule, prepare
from tests.support.link_graph import GraphSite, LinkGraph
from tests.support.rabbit_cluster import RabbitCluster
from tests.support.tcp_proxy import TcpProxy
from tests.support.waiting import wait_for
from tests.support.webhook_receiver import WebhookReceiver
from tests.support.workers import REPO, TEST_SECRET_KEY, DramatiqWorkers, crawlsched_env

CLI = str(Path(sys.executable).parent / "crawlsched")
CRAWL_QUEUE = "crawlsched.crawl.article"
FAULTS = ("worker", "worker_term", "clock", "rabbit_node", "rabbit_stop", "mongo_cut")
# The faults that need the three-node cluster.
CLUSTER_FAULTS = ("rabbit_node", "rabbit_stop")
# Pages at any depth; a dead batch reclaimed after 20 s; quick tries again after a
# machinery failure; a slow, loaded test server waited for rather than given up on.
TRIAL_ENV = {
    "CRAWLSCHED_DISPATCH_LEASE_S": "20",
    "CRAWLSCHED_REDO_BACKOFF_S": "0.5",
    "CRAWLSCHED_HOST_CONCURRENCY": "4",
    "CRAWLSCHED_CONNECT_TIMEOUT_S": "30",
    "CRAWLSCHED_LOG_LEVEL": "WARNING",
}


@dataclass
class Services:
    """What the trials share: the broker URL (a vhost's, or a cluster's), the MongoDB URL."""

    broker_url: str
    mongo_url: str
    cluster: RabbitCluster | None = None
    logs: list[Path] = field(default_factory=list)


class EventTap:
    """A queue of our own bound to `run.#` on the events exchange (quorum on a cluster)."""

    def __init__(self, broker_url: str, quorum: bool) -> None:
        self.urls = split_broker_urls(broker_url)
        self.name = f"fault-events-{uuid.uuid4().hex[:8]}"
        self.events: list[dict[str, Any]] = []
        args = {"x-queue-type": "quorum"} if quorum else {}
        with self._channel() as channel:
            channel.exchange_declare(exchange=EXCHANGE, exchange_type="topic", durable=True)
            channel.queue_declare(self.name, durable=True, arguments=args)
            channel.queue_bind(self.name, EXCHANGE, routing_key="run.#")

    @contextlib.contextmanager
    def _channel(self):
        connection = pika.BlockingConnection([pika.URLParameters(u) for u in self.urls])
        try:
            yield connection.channel()
        finally:
            with contextlib.suppress(Exception):
                connection.close()

    def drain(self) -> list[dict[str, Any]]:
        with contextlib.suppress(Exception), self._channel() as channel:
            while True:
                method, _props, body = channel.basic_get(self.name, auto_ack=True)
                if method is None:
                    break
                self.events.append(json.loads(body))
        return self.events

    def delete(self) -> None:
        with contextlib.suppress(Exception), self._channel() as channel:
            channel.queue_delete(self.name)


class Clock:
    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.env, self.log = env, log
        self.process: subprocess.Popen | None = None

    def start(self) -> Clock:
        out = self.log.open("ab")
        self.process = subprocess.Popen(
            [CLI, "clock", "--interval", "1"],
            cwd=REPO, env=self.env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        out.close()
        return self

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, sig)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=30)


def _run_now(env: dict[str, str], schedule_id: str) -> str:
    done = subprocess.run(
        [CLI, "run", "now", schedule_id, "--json"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"crawlsched run now {schedule_id}: {done.stderr[-2000:]}")
    return json.loads(done.stdout.splitlines()[0])["run_id"]


def _ended(rt: Runtime, run_id: str) -> dict | None:
    with contextlib.suppress(pymongo.errors.PyMongoError):
        run = rt.runs.get(run_id)
        if run and run["state"] in ("finished", "stopped"):
            return run
    return None


def distributed_trial(
    services: Services,
    workdir: Path,
    graph: LinkGraph,
    delay_s: float,
    fault: str | None,
    kill_when: Moment | None,
    end_within_s: float = 600,
    outage_s: float = 5.0,
    batch_limit: int | None = None,
    **env: str,
) -> TrialOutcome:
    if fault is not None and fault not in FAULTS:
        raise ValueError(f"fault must be one of {FAULTS}, got {fault!r}")
    workdir.mkdir(parents=True, exist_ok=True)
    db_name = f"faults_{uuid.uuid4().hex[:10]}"
    rt = Runtime(
        Settings(
            mongo_url=services.mongo_url,
            mongo_db=db_name,
            broker_url="stub://",
            secret_key=TEST_SECRET_KEY,
            connect_timeout_s=60,
            # The webhook receiver is on loopback: the schedule's URL is checked against this.
            target_allow_networks=["127.0.0.1/32"],
        )
    )
    prepare(rt, batch_limit=batch_limit)
    cluster = services.cluster
    extra = {**TRIAL_ENV, **env}
    if cluster is not None:
        extra["CRAWLSCHED_QUEUE_TYPE"] = "quorum"
    clock_env = crawlsched_env(services.broker_url, services.mongo_url, db_name, **extra)
    proxy = None
    worker_mongo = services.mongo_url
    if fault == "mongo_cut":
        port = int(services.mongo_url.split(":")[2].split("/")[0])
        proxy = TcpProxy(port).start()
        worker_mongo = f"mongodb://127.0.0.1:{proxy.port}/?directConnection=true"
    worker_env = crawlsched_env(services.broker_url, worker_mongo, db_name, **extra)
    tap = EventTap(services.broker_url, quorum=cluster is not None)
    fault_at = None
    drained: tuple[float, int] | None = None
    groups: list[DramatiqWorkers] = []
    clocks: list[Clock] = []
    victim = None
    try:
        with GraphSite(graph, delay_s=delay_s) as site, WebhookReceiver() as hook:
            schedule_id = f"faults-{uuid.uuid4().hex[:6]}"
            add_graph_schedule(
                rt, site.base_url, schedule_id, webhook=hook.url, notify_on=list(NOTIFY_EVENTS)
            )
            groups.append(DramatiqWorkers(worker_env, processes=2, threads=2).start())
            clocks.append(Clock(clock_env, workdir / "clock.log").start())
            services.logs += [Path(groups[0].log.name), workdir / "clock.log"]
            started_at = time.time()
            run_id = _run_now(clock_env, schedule_id)
            if kill_when is not None:
                wait_for(
                    lambda: kill_when(site, time.time() - started_at) or _ended(rt, run_id),
                    end_within_s,
                    "the moment of the fault",
                    interval=0.02,
                )
                if _ended(rt, run_id) is None:
                    fault_at = time.time()
                    if fault == "worker":
                        groups[-1].kill()
                        groups.append(DramatiqWorkers(worker_env, processes=2, threads=2).start())
                        services.logs.append(Path(groups[-1].log.name))
                    elif fault == "worker_term":
                        drained = groups[-1].terminate()
                        groups.append(DramatiqWorkers(worker_env, processes=2, threads=2).start())
                        services.logs.append(Path(groups[-1].log.name))
                    elif fault == "clock":
                        clocks[-1].kill()
                        clocks.append(Clock(clock_env, workdir / "clock.log").start())
                    elif fault == "rabbit_node":
                        victim = _crawl_queue_leader(cluster)
                        cluster.sigkill(victim)
                    elif fault == "rabbit_stop":
                        victim = _crawl_queue_leader(cluster)
                        cluster.stop_app(victim)
                    elif fault == "mongo_cut":
                        proxy.cut()
                        time.sleep(outage_s)
                        proxy.start()  # the same port again
            try:
                wait_for(lambda: _ended(rt, run_id), end_within_s, f"run {run_id} to end", 0.5)
            except AssertionError as e:
                raise AssertionError(
                    f"{e}; {_left_open(rt, run_id)}; queues {_queue_depths(services.broker_url)}"
                ) from None
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                delivered = any(p["body"].get("run_id") == run_id for p in hook.delivered())
                seen = any(
                    e.get("run_id") == run_id and e.get("event") in END_EVENTS for e in tap.drain()
                )
                if delivered and seen:
                    break
                time.sleep(0.5)
            access_log, posts = list(site.access_log), list(hook.posts)
        check = check_run(rt.db, run_id, graph, site.base_url, access_log, tap.drain(), posts)
        ended_at = unix_time((rt.runs.get(run_id) or {}).get("finished_at")) or time.time()
        outcome = TrialOutcome(check, started_at, fault_at, ended_at)
        if drained is not None:
            outcome.drain_s, outcome.drain_exit = drained
        return outcome
    finally:
        for group in groups:
            group.stop()
        for clock in clocks:
            clock.kill(signal.SIGTERM)
        if proxy is not None:
            proxy.cut()
        tap.delete()
        if victim is not None:
            cluster.restart(victim)
        with (
            contextlib.suppress(pymongo.errors.PyMongoError),
            pymongo.MongoClient(services.mongo_url, serverSelectionTimeoutMS=10_000) as client,
        ):
            client.drop_database(db_name)


def _left_open(rt: Runtime, run_id: str) -> str:
    """What keeps a run open, for a trial that timed out: its outstanding count, the jobs
    still running by dispatch (how many, and how long their lease has left), the batches
    waiting, and the pending pages."""
    now = rt.now()
    running: dict[str, list] = {}
    for doc in rt.db.websites.find({"run_id": run_id, "state": int(JobState.RUNNING)}):
        running.setdefault(doc.get("dispatch_id"), []).append(doc.get("lease_deadline"))

    def left_s(deadlines: list) -> int | None:
        try:
            return round((min(deadlines) - now).total_seconds())
        except TypeError:  # (no deadline, or one without a time zone)
            return None

    leases = {str(d)[:8]: (len(v), left_s(v)) for d, v in running.items()}
    unstarted = rt.db.websites.count_documents(
        {"run_id": run_id, "state": int(JobState.RUNNING), "unstarted": True}
    )
    leases["unstarted"] = unstarted
    waiting = [(w["_id"][:8], w.get("jobs"), w.get("needs")) for w in rt.db.waiting_batches.find()]
    pending = rt.db.websites.count_documents({"run_id": run_id, "state": int(JobState.PENDING)})
    unreleased = rt.db.websites.count_documents({"scope_run": run_id, "released": False})
    run = rt.runs.get(run_id) or {}
    return (
        f"outstanding {run.get('outstanding')}, running by dispatch (jobs, lease left s) "
        f"{leases}, waiting {waiting}, pending {pending}, unreleased {unreleased}"
    )


def _queue_depths(broker_url: str) -> dict[str, tuple[int, int]]:
    """Ready and unacknowledged messages of each queue of the trial's virtual host, that
    has any (rabbitmqctl; empty when it cannot be asked)."""
    vhost = broker_url.rsplit("/", 1)[-1].split("?", maxsplit=1)[0]
    try:
        out = subprocess.run(
            [
                "rabbitmqctl",
                "-q",
                "list_queues",
                "-p",
                vhost,
                "name",
                "messages_ready",
                "messages_unacknowledged",
            ],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    depths = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1].isdigit() and (int(parts[1]) or int(parts[2])):
            depths[parts[0]] = (int(parts[1]), int(parts[2]))
    return depths


def _crawl_queue_leader(cluster: RabbitCluster):
    homes = cluster.queue_homes(cluster.nodes[-1])
    name = homes.get(CRAWL_QUEUE)
    return cluster.node_named(name) if name else cluster.nodes[0]

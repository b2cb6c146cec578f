"""Runs on the demo social network through proxies: the reference with a media's `proxy` row,
and profile jobs of a task fired through the planner's queue."""

from __future__ import annotations

from datetime import timedelta

from crawlsched.catalog import JobState
from crawlsched.demo.seed import crawl_reference
from crawlsched.flow import schedule_ops
from crawlsched.planning.run_names import FINISHED, run_id_for
from crawlsched.reference import ProxyRow
from crawlsched.runtime import Runtime
from tests.support.waiting import wait_for


def load_proxied(rt: Runtime, network_url: str, proxied: dict[str, ProxyRow]) -> dict[str, int]:
    """The demo reference on the network, the media named in `proxied` going out through
    proxies; the media ids by name."""
    reference = crawl_reference(network_url)
    media = [
        m.model_copy(update={"proxy": proxied[m.name]}) if m.name in proxied else m
        for m in reference.media
    ]
    rt.create_indexes()
    rt.reference.load(reference.model_copy(update={"media": media}))
    return {m["media_name"]: m["_id"] for m in rt.reference.media()}


def fire(rt: Runtime, media: str, media_id: int, task: str, handles: list[str], name: str) -> str:
    """Profile jobs of `task` for `handles`, a schedule of them fired a second ago through
    the planner's queue; the run's id."""
    from crawlsched.actors.planner import plan_crawls

    now = rt.now()
    rt.jobs("profiles").insert_new(
        [
            {
                "target": handle,
                "media_name": media,
                "media_name_id": media_id,
                "task": task,
                "state": int(JobState.PENDING),
                "enabled": True,
                "execution_date": now - timedelta(seconds=1),
                "attempt_count": 0,
                "interval_s": 3600,
            }
            for handle in handles
        ]
    )
    given = {"interval_s": 3600, "target_collection": "profiles", "targets": handles}
    schedule_ops.create(rt, name, given)
    fire_at = now - timedelta(seconds=1)
    plan_crawls.send(name, fire_at.isoformat())
    return run_id_for(name, fire_at)


def ticking_until_finished(rt: Runtime, run_id: str, what: str, timeout_s: float = 120) -> dict:
    """The run once it has finished, a tick sent every half second meanwhile (the clock: its
    admission sweeps see proxies rested or enabled)."""
    from crawlsched.actors import ticker

    def done():
        ticker.tick.send()
        run = rt.runs.get(run_id)
        return run if run and run["state"] == FINISHED else None

    return wait_for(done, timeout_s, what, interval=0.5)

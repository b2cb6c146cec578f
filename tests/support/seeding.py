"""Seed a store for end-to-end tests: the demo's data, optionally on another driver."""

from __future__ import annotations

from crawlsched.demo import seed as demo_seed
from crawlsched.planning.run_names import FINISHED
from crawlsched.reference import ReferenceData
from crawlsched.runtime import Runtime


def seed(
    rt: Runtime, base_url: str, driver_class: str | None = None, node_url: str | None = None
) -> dict[str, int]:
    """The demo's jobs and pools; with `driver_class`, every media uses that driver instead."""
    if driver_class is not None:
        original = demo_seed.demo_reference

        def with_driver(url: str) -> ReferenceData:
            reference = original(url)
            media = [m.model_copy(update={"driver_class": driver_class}) for m in reference.media]
            return reference.model_copy(update={"media": media})

        demo_seed.demo_reference = with_driver
        try:
            return demo_seed.seed(rt, base_url, node_url)
        finally:
            demo_seed.demo_reference = original
    return demo_seed.seed(rt, base_url, node_url)


def fire_all_now(rt: Runtime) -> None:
    for schedule in rt.schedules.all():
        rt.schedules.fire_now(schedule["_id"], rt.now())


def all_runs_finished(rt: Runtime, expected: int = 2) -> list[dict] | None:
    runs = rt.runs.recent()
    if len(runs) >= expected and all(r["state"] == FINISHED for r in runs):
        return runs
    return None

"""bench_scaling's day model: every due job is crawled once per interval, pools are never
overdrawn, and idle pods are paid for."""

from __future__ import annotations

from benchmarks import _keda_model as keda
from benchmarks import _scaling_sim as sim


def _classes(http_min: int = 1, browser_min: int = 0) -> dict[str, sim.WorkerClass]:
    def rule(low: int) -> keda.KedaRule:
        return keda.KedaRule(value=5, activation_value=0, polling_interval_s=15,
                             cooldown_period_s=60, min_replicas=low, max_replicas=3)  # fmt: skip

    return {
        "http": sim.WorkerClass("http", rule(http_min), 4, 2.0, 10.0),
        "browser": sim.WorkerClass("browser", rule(browser_min), 2, 0.5, 10.0),
    }


def test_scaling_sim_crawls_each_due_job_once_and_finishes_every_run():
    # Given jobs due once in the hour (interval longer than the day), an account each for two
    # login media, one browser slot
    groups = [
        sim.JobGroup("profiles", "tw", 1, "profile", True, False, 5, 12, 10_000),
        sim.JobGroup("profiles", "yt", 2, "profile", False, False, 50, 40, 10_000),
        sim.JobGroup("profiles", "tt", 3, "profile", False, True, 4, 9, 10_000),
        sim.JobGroup("websites", "web", 4, "article", False, False, 50, 3, 10_000),
    ]
    # When an hour is replayed
    out = sim.simulate(groups, {"profiles": 300, "websites": 900}, _classes(), {"tw": 1}, 1, 3600)
    runs = [r for r in out["runs"] if r.jobs]
    # Then the first firing of each sweep carried every job, in the planner's batch sizes
    assert sorted(r.jobs for r in runs) == [3, 12 + 40 + 9]
    # and every run finished in each class it had work in
    for r in runs:
        assert set(r.done_at) == set(r.open_batches)
        assert all(r.done_at[c] >= r.first_start[c] >= r.fired_at for c in r.done_at)


def test_scaling_sim_pays_for_the_minimum_and_holds_one_account_at_a_time():
    # Given 3 batches of a login media with one account, each 10 jobs at 0.5 jobs/s: 20 s
    groups = [sim.JobGroup("profiles", "tw", 1, "profile", True, True, 10, 30, 10_000)]
    out = sim.simulate(groups, {"profiles": 300}, _classes(browser_min=0), {"tw": 1}, 5, 600)
    run = next(r for r in out["runs"] if r.jobs)
    # Then they run one after another (one account), not side by side: at least 3 x 20 s
    assert run.done_at["browser"] - run.first_start["browser"] >= 3 * 20 - 5
    # and the http class, with nothing to do, still costs its minimum pod for the whole time
    assert out["classes"]["http"].pod_seconds == 600

"""The leased account in real runs on the demo social network: a wrong password bans the
account and the batch waits (not failed) until another account serves it; a 429 cools the
account until Retry-After and the batch waits, then succeeds."""

from __future__ import annotations

from datetime import timedelta

from crawlsched.catalog import JobState
from crawlsched.demo.seed import crawl_reference
from crawlsched.demo.social import DemoSocialNetwork
from crawlsched.flow import schedule_ops
from crawlsched.planning.run_names import FINISHED, run_id_for
from crawlsched.resources.rules import AccountLimits, account_state
from crawlsched.runtime import get_runtime
from tests.support.waiting import wait_for


def _start(rt, net, task: str, handle: str, schedule_id: str) -> str:
    from crawlsched.actors.planner import plan_crawls

    rt.create_indexes()
    rt.reference.load(crawl_reference(net.base_url))
    media_id = rt.reference.media_by_name("twitter")["_id"]
    now = rt.now()
    job = {
        "target": handle,
        "media_name": "twitter",
        "media_name_id": media_id,
        "task": task,
        "state": int(JobState.PENDING),
        "enabled": True,
        "execution_date": now - timedelta(seconds=1),
        "attempt_count": 0,
        "interval_s": 3600,
    }
    rt.jobs("profiles").insert_new([job])
    given = {"interval_s": 3600, "target_collection": "profiles", "targets": [handle]}
    schedule_ops.create(rt, schedule_id, given)
    fire_at = now - timedelta(seconds=1)
    plan_crawls.send(schedule_id, fire_at.isoformat())
    return run_id_for(schedule_id, fire_at)


def _ticking_until_finished(rt, run_id: str, what: str) -> dict:
    from crawlsched.actors import ticker

    def finished():
        ticker.tick.send()  # the clock: admission sweeps see cooled or added accounts
        run = rt.runs.get(run_id)
        return run if run and run["state"] == FINISHED else None

    return wait_for(finished, 90, what, interval=0.5)


def test_wrong_password_bans_the_account_and_the_batch_waits_for_another(stub_pipeline):
    stub_pipeline(threads=2, admission_wait_s=600)
    rt = get_runtime()
    with DemoSocialNetwork(["ada"], {"alice": "pw", "mallory": "pw"}) as net:
        rt.inventory.add_account(
            "twitter", "mallory", "not-her-password", AccountLimits(), rt.now()
        )
        run_id = _start(rt, net, "profile_replies", "ada", "replies")
        wait_for(
            lambda: account_state(rt.inventory.accounts("twitter")[0], rt.now()) == "banned",
            60,
            "the refused account to be banned",
        )
        job = rt.db.profiles.find_one({"target": "ada"})
        assert job["state"] == int(JobState.RUNNING) and job.get("last_outcome") is None
        assert rt.runs.get(run_id)["state"] != FINISHED  # waiting, not failed
        # When a good account is added, the waiting batch is served by it
        rt.inventory.add_account("twitter", "alice", "pw", AccountLimits(), rt.now())
        run = _ticking_until_finished(rt, run_id, "the run, served by the good account")
    assert run["counts"] == {"succeeded": 1}
    stored = {d["key"] for d in rt.db.comments.find({"run_id": run_id})}
    assert stored == {f"ada/reply/{r['id']}" for r in net.data["ada"].replies}


def test_too_fast_cools_the_account_and_the_batch_waits_then_succeeds(stub_pipeline):
    stub_pipeline(threads=2, admission_wait_s=600)
    rt = get_runtime()
    # At most 4 requests in 2 s: the 13 follower pages of one profile cannot go at once
    with DemoSocialNetwork(["ada"], {"alice": "pw"}, rate_limit=(4, 2.0)) as net:
        rt.inventory.add_account("twitter", "alice", "pw", AccountLimits(), rt.now())
        run_id = _start(rt, net, "friend", "ada", "friends")
        run = _ticking_until_finished(rt, run_id, "the friend crawl through its cool-downs")
        too_fast = net.too_fast
    assert too_fast >= 1  # the site did say slow down
    assert run["counts"].get("succeeded", 0) == run["planned"] + run["discovered"]
    friends = list(rt.db.friends.find({"run_id": run_id}))
    profile = net.data["ada"]
    assert sorted(f["other"] for f in friends if f["list"] == "followers") == profile.followers
    assert sorted(f["other"] for f in friends if f["list"] == "followings") == profile.followings


def test_a_limit_on_one_endpoint_locks_the_account_for_that_task_only(stub_pipeline):
    stub_pipeline(threads=2, admission_wait_s=600)
    rt = get_runtime()
    # Two requests a minute per endpoint: the friend lists run into the limit at once
    with DemoSocialNetwork(["ada"], {"alice": "pw"}, endpoint_rate_limit=(2, 60.0)) as net:
        rt.inventory.add_account("twitter", "alice", "pw", AccountLimits(), rt.now())
        friends = _start(rt, net, "friend", "ada", "friends")
        wait_for(
            lambda: (rt.inventory.accounts("twitter")[0].get("task_locks") or {}).get("friend"),
            60,
            "the account to be locked for the friend task",
        )
        [account] = rt.inventory.accounts("twitter")
        assert account_state(account, rt.now()) == "active"  # not cooled for everything
        assert set(account["task_locks"]) == {"friend"}
        # Then a replies crawl with the same account is served meanwhile
        replies = _start(rt, net, "profile_replies", "ada", "replies")
        run = _ticking_until_finished(rt, replies, "the replies crawl, on the locked account")
        assert rt.runs.get(friends)["state"] != FINISHED  # its rest waits for the reset
    assert run["counts"] == {"succeeded": 1}

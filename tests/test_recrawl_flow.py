"""Adaptive recrawl through the real crawl of a batch on the embedded store, and what
`GET /v1/jobs/{collection}/{job_id}` and `crawlsched jobs show` say of it.

One thread, the test's clock; the driver is a plug-in of this module that saves what the test's
pages hold at each visit (one that never changes, one that changes each time)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import timedelta

import pytest
from bson import ObjectId
from typer.testing import CliRunner

from crawlsched.cli import run
from crawlsched.crawl.batch import crawl_batch
from crawlsched.demo.seed import demo_reference
from crawlsched.ids import encode_id
from crawlsched.messages import BatchMessage
from crawlsched.planning import change_rate
from crawlsched.runtime import Runtime
from crawlsched.settings import Settings
from crawlsched.store.job_claims import ClaimRequest
from tests.conftest import settings_for_tests
from tests.support.api import ApiServer, seeded_runtime
from tests.support.claimed import Clock, claimed_batch
from tests.support.cli_remote import remote_cli
from tests.support.factories import NOW

RUN = "recrawl@20240601T120000Z"
HOUR, DAY = 3600.0, 86400.0
VISITS: dict[str, int] = {}  # target prefix -> visits so far


class PagesDriver:
    """job0 always holds the same profile; job1's profile changes at every visit."""

    def crawl(self, job, context) -> None:
        name = job.target.split("-")[0]
        VISITS[name] = VISITS.get(name, 0) + 1
        bio = "same as ever" if name == "job0" else f"edit {VISITS[name]}"
        context.save("profile", [{"key": job.target, "bio": bio}])


DRIVERS = {"recrawl-pages": PagesDriver}


@pytest.fixture
def clock():
    clock = Clock(NOW)  # the runtime's environment: its monotonic clock too
    yield clock
    VISITS.clear()


@pytest.fixture
def rt(embedded_mongo_url, clock):
    settings = settings_for_tests(
        mongo_url=embedded_mongo_url, broker_url="stub://", driver_modules=[__name__]
    )
    rt = Runtime(settings, env=clock.env())
    rt.create_indexes()
    rt.reference.load(demo_reference("http://127.0.0.1:9"))
    rt.db.runs.insert_one({"_id": RUN, "state": "running"})
    return rt


def adaptive_twitter(rt: Runtime, **policy) -> None:
    rt.db.childs_socialmedia.update_one(
        {"media_name": "twitter"},
        {"$set": {"recrawl": {"adaptive": True, "min_interval_s": HOUR,
                              "max_interval_s": 30 * DAY, "jitter": 0.0, **policy}}},
    )  # fmt: skip


def recurring_batch(rt: Runtime, interval_s: float) -> BatchMessage:
    message = claimed_batch(
        rt, 2, run_id=RUN, driver_class="recrawl-pages", login=False, selenium=False
    )
    ids = message.decoded_job_ids()
    rt.db.profiles.update_many({"_id": {"$in": ids}}, {"$set": {"interval_s": interval_s}})
    return message


def crawl_again(rt: Runtime, message: BatchMessage) -> BatchMessage:
    """The same jobs, claimed again by a fresh dispatch (as the next sweep would)."""
    dispatch = uuid.uuid4().hex
    claimed = rt.jobs("profiles").claim(
        [ClaimRequest(dispatch, message.decoded_job_ids())], RUN, rt.now() + timedelta(hours=1)
    )
    assert len(claimed[dispatch]) == 2
    again = message.model_copy(update={"dispatch_id": dispatch})
    assert crawl_batch(rt, again, report=lambda r: None) == {"succeeded": 2}
    return again


def by_page(rt: Runtime, message: BatchMessage) -> dict[str, dict]:
    docs = rt.db.profiles.find({"_id": {"$in": message.decoded_job_ids()}})
    return {d["target"].split("-")[0]: d for d in docs}


# -- through the crawl --------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["estimate", "steps"])
def test_an_unchanging_page_is_crawled_less_often_and_a_changing_one_more(rt, clock, method):
    # Given twitter adaptive (no jitter) and two daily jobs, crawled once: both pages were new
    adaptive_twitter(rt, method=method)
    message = recurring_batch(rt, DAY)
    assert crawl_batch(rt, message, report=lambda r: None) == {"succeeded": 2}
    first = by_page(rt, message)
    # `estimate` learns nothing from a first crawl (nothing to compare with); `steps` counts
    # everything new as a change
    after_first = DAY if method == "estimate" else (1 - rt.settings.recrawl_dec_rate) * DAY
    assert first["job0"]["recrawl"]["interval_s"] == pytest.approx(after_first)

    # When each is crawled again four times, once it is due
    seen: dict[str, list[float]] = {"job0": [], "job1": []}
    for _ in range(4):
        clock.t = min(d["execution_date"] for d in by_page(rt, message).values())
        crawled_at = clock.now()
        message = crawl_again(rt, message)
        for name, doc in by_page(rt, message).items():
            interval = doc["recrawl"]["interval_s"]
            seen[name].append(interval)
            # due again one (unjittered) interval after the crawl, to the store's millisecond
            due = crawled_at + timedelta(seconds=interval)
            assert abs(doc["execution_date"] - due) < timedelta(milliseconds=1)
            assert doc["interval_s"] == DAY  # the configured interval is kept as it was

    # Then the unchanging page's interval grows every time, the changing one's shrinks
    assert seen["job0"] == sorted(seen["job0"]) and seen["job0"][-1] > DAY
    assert seen["job1"] == sorted(seen["job1"], reverse=True)
    assert seen["job1"][-1] < DAY
    if method == "steps":
        shorter = (1 - rt.settings.recrawl_dec_rate) ** 5 * DAY
        assert seen["job1"][-1] == pytest.approx(shorter)
    state = by_page(rt, message)
    assert state["job0"]["recrawl"]["visits"] == state["job1"]["recrawl"]["visits"] == 5
    assert state["job0"]["recrawl"]["changes"] == 1  # only the first crawl found it new
    assert state["job1"]["recrawl"]["changes"] == 5
    assert state["job0"]["recrawl"]["last_items"] == {"new": 0, "changed": 0, "unchanged": 1}
    assert state["job1"]["recrawl"]["last_items"] == {"new": 0, "changed": 1, "unchanged": 0}


def test_intervals_stay_within_the_media_s_bounds_with_jitter(rt, clock):
    adaptive_twitter(rt, min_interval_s=20 * HOUR, max_interval_s=30 * HOUR, jitter=0.3)
    message = recurring_batch(rt, DAY)
    crawl_batch(rt, message, report=lambda r: None)
    for _ in range(5):
        clock.advance(40 * HOUR)
        crawled_at = clock.now()
        message = crawl_again(rt, message)
        for doc in by_page(rt, message).values():
            delay = (doc["execution_date"] - crawled_at).total_seconds()
            assert 20 * HOUR <= delay <= 30 * HOUR
            assert 20 * HOUR <= doc["recrawl"]["interval_s"] <= 30 * HOUR


def test_a_fixed_media_keeps_its_interval_and_still_records_the_evidence(rt, clock):
    message = recurring_batch(rt, DAY)  # twitter says nothing of recrawl: fixed
    crawl_batch(rt, message, report=lambda r: None)
    clock.advance(DAY)
    message = crawl_again(rt, message)
    for doc in by_page(rt, message).values():
        assert doc["execution_date"] == clock.now() + timedelta(days=1)
        assert doc["recrawl"]["mode"] == "fixed"
        assert doc["recrawl"]["interval_s"] == DAY
        assert doc["recrawl"]["visits"] == 2


def test_a_hand_edited_policy_the_rule_refuses_falls_back_to_fixed(rt, clock):
    adaptive_twitter(rt, min_interval_s=10 * DAY, max_interval_s=DAY)
    message = recurring_batch(rt, DAY)
    assert crawl_batch(rt, message, report=lambda r: None) == {"succeeded": 2}
    for doc in by_page(rt, message).values():
        assert doc["execution_date"] == clock.now() + timedelta(days=1)
        assert doc["recrawl"]["mode"] == "fixed"


# -- the API and the command line ---------------------------------------------------------------


@pytest.fixture
def api(embedded_mongo_url: str) -> Iterator[ApiServer]:
    with ApiServer(seeded_runtime(embedded_mongo_url)) as server:
        yield server


def _web_job(rt: Runtime, recrawl: dict | None) -> str:
    web = rt.reference.media_by_name("web")
    doc = {
        "target": f"https://example.org/{uuid.uuid4().hex[:6]}",
        "media_name": "web",
        "media_name_id": web["media_name_id"],
        "task": "article",
        "state": 1,
        "interval_s": 7200,
        "execution_date": rt.now(),
        **({"recrawl": recrawl} if recrawl else {}),
    }
    return encode_id(rt.db.websites.insert_one(doc).inserted_id)


def test_the_api_shows_a_job_s_configured_and_current_interval_and_evidence(api):
    rt = api.runtime
    last = {"new": 0, "changed": 0, "unchanged": 4}
    state = {"mode": "adaptive", "interval_s": 10080.0, "visits": 3, "changes": 0,
             "last_items": last, "updated_at": rt.now()}  # fmt: skip
    job_id = _web_job(rt, state)

    response = api.reader.get(f"/v1/jobs/websites/{job_id}")

    assert response.status_code == 200, response.text
    recrawl = response.json()["recrawl"]
    assert recrawl["mode"] == "adaptive"  # the packaged reference makes `web` adaptive
    assert (recrawl["configured_interval_s"], recrawl["current_interval_s"]) == (7200, 10080)
    assert (recrawl["min_interval_s"], recrawl["max_interval_s"]) == (3600, 2592000)
    assert (recrawl["visits"], recrawl["changes"]) == (3, 0)
    assert recrawl["last_items"] == {"new": 0, "changed": 0, "unchanged": 4}
    # a state of the steps rule, or of an older version, has no estimate to show
    assert (recrawl["method"], recrawl["estimated_change_every_s"]) == ("estimate", None)
    assert response.json()["job_id"] == job_id
    schema = api.app.openapi()["paths"]["/v1/jobs/{collection}/{job_id}"]["get"]
    assert "JobView" in json.dumps(schema["responses"]["200"])


def test_the_api_and_jobs_show_give_the_estimated_time_between_changes_behind_the_interval(api):
    rt = api.runtime
    # Given a job whose crawls taught it that its page changes about every 5 hours
    belief = change_rate.prior(5 * 3600.0)
    for _ in range(6):
        belief = change_rate.updated(belief, 10 * 3600.0, changed=True, memory=0.95)
        belief = change_rate.updated(belief, 1 * 3600.0, changed=False, memory=0.95)
    every = 1 / change_rate.mean_rate(belief)
    state = {
        "mode": "adaptive",
        "interval_s": 2 * every,
        "visits": 13,
        "changes": 6,
        "last_items": {"unchanged": 3},
        "rate_belief": belief,
        "updated_at": rt.now(),
    }
    job_id = _web_job(rt, state)

    # When it is read through the API and shown by the CLI
    recrawl = api.reader.get(f"/v1/jobs/websites/{job_id}").json()["recrawl"]
    shown = remote_cli(api.url, api.read_token)("jobs", "show", "websites", job_id)

    # Then both give the estimate the interval follows (twice it, within the bounds)
    assert recrawl["method"] == "estimate"
    assert recrawl["estimated_change_every_s"] == pytest.approx(every)
    assert recrawl["current_interval_s"] == pytest.approx(2 * every)
    out = " ".join(shown.stdout.split())
    assert "adaptive (estimate)" in out
    assert f"estimated change every │ {every / 3600:.3g}h ({every:.0f} s)" in out


def test_the_api_says_404_for_an_unknown_job_and_401_without_a_token(api):
    missing = api.reader.get(f"/v1/jobs/websites/oid:{ObjectId()}")
    assert missing.status_code == 404
    assert "no job" in missing.json()["detail"]
    assert api.anonymous.get(f"/v1/jobs/websites/oid:{ObjectId()}").status_code == 401


def test_jobs_show_is_a_read_command_through_the_api(api):
    job_id = _web_job(api.runtime, None)
    shown = remote_cli(api.url, api.read_token)("jobs", "show", "websites", job_id)
    assert shown.exit_code == 0, shown.output
    out = " ".join(shown.stdout.split())
    assert "adaptive" in out and "configured interval │ 2h (7200 s)" in out


@pytest.fixture
def invoke(monkeypatch: pytest.MonkeyPatch) -> Iterator:
    url = f"mongomock://recrawl-{uuid.uuid4().hex}"
    monkeypatch.setenv("CRAWLSCHED_MONGO_URL", url)

    def call(*args: str) -> tuple[int, str, str]:
        runner = CliRunner()
        with runner.isolation() as (out, err, _):
            code = run(list(args))
            return code, out.getvalue().decode(), err.getvalue().decode()

    assert call("init-db")[0] == 0
    yield call


def test_jobs_show_prints_the_intervals_and_the_evidence(invoke):
    code, _, err = invoke("jobs", "add", "profile", "twitter", "alice")
    assert code == 0, err
    rt = Runtime(Settings())  # the commands' own embedded store (the environment's)
    job = rt.db.profiles.find_one({"target": "alice", "task": "profile"})
    job_id = encode_id(job["_id"])

    code, out, err = invoke("jobs", "show", "profiles", job_id)
    assert code == 0, err
    text = " ".join(out.split())
    assert "recrawl │ fixed" in text  # twitter keeps fixed intervals
    assert "configured interval │ 1d (86400 s)" in text
    assert "current interval │ 1d (86400 s)" in text

    code, out, err = invoke("jobs", "show", "profiles", job_id, "--json")
    shown = json.loads(out)
    assert shown["recrawl"]["mode"] == "fixed" and shown["recrawl"]["visits"] == 0
    assert shown["job_id"] == job_id


def test_jobs_show_of_an_unknown_job_exits_2(invoke):
    code, _, err = invoke("jobs", "show", "profiles", f"oid:{ObjectId()}")
    assert code == 2
    assert "no job" in err
    code, _, err = invoke("jobs", "show", "nowhere", "oid:1")
    assert code == 2
    assert "unknown job collection" in err


def test_the_api_shows_a_job_of_the_old_system_with_odd_fields(api):
    rt = api.runtime
    web = rt.reference.media_by_name("web")
    job_id = encode_id(
        rt.db.websites.insert_one(
            {"url": "https://example.org/old", "media_name_id": web["media_name_id"],
             "task": "article", "state": 1, "interval_s": "3600", "target": 12,
             "recrawl": {"interval_s": "soon", "visits": -1, "last_items": {"new": "x"}}}
        ).inserted_id
    )  # fmt: skip

    response = api.reader.get(f"/v1/jobs/websites/{job_id}")

    assert response.status_code == 200, response.text
    recrawl = response.json()["recrawl"]
    assert (recrawl["mode"], recrawl["configured_interval_s"], recrawl["visits"]) == (
        "once",
        None,
        0,
    )
    assert recrawl["last_items"] == {} and recrawl["next_at"] is None
    assert response.json()["target"] == 12  # shown as stored

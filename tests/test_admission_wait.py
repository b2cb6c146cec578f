"""An admission pass may meet a batch parked after the pass read its clock: its wait is zero,
never negative (a negative wait made the crawl message invalid and dead-lettered the batch)."""

from __future__ import annotations

import uuid
from datetime import timedelta

from crawlsched.catalog import JobState
from crawlsched.demo.seed import demo_reference
from crawlsched.flow.admission import admit_waiting, keys_of, park
from crawlsched.ids import encode_id
from crawlsched.messages import BatchMessage
from crawlsched.planning.due import Category
from crawlsched.resources.rules import AccountLimits
from crawlsched.runtime import get_runtime


def test_a_batch_parked_after_the_pass_began_is_admitted_with_a_zero_wait(stub_broker):
    rt = get_runtime()
    rt.create_indexes()
    rt.reference.load(demo_reference("http://127.0.0.1:9"))
    rt.inventory.add_account("twitter", "acct", "secret", AccountLimits(), rt.now())
    twitter = rt.reference.media_by_name("twitter")
    rt.jobs("profiles").insert_new(
        [
            {
                "target": "someone",
                "media_name": "twitter",
                "media_name_id": twitter["_id"],
                "task": "profile",
                "state": int(JobState.PENDING),
                "enabled": True,
                "execution_date": rt.now(),
            }
        ]
    )
    ids = [doc["_id"] for doc in rt.db.profiles.find({}, {"_id": 1})]
    message = BatchMessage(
        run_id="sweep-profiles@20260101T000000Z",
        dispatch_id=uuid.uuid4().hex,
        collection="profiles",
        task="profile",
        category=Category.ONLY_LOGIN,
        media_name="twitter",
        media_id=twitter["media_name_id"],
        driver_class="http",
        need_login=True,
        need_selenium=False,
        crawl_limit=10,
        job_ids=[encode_id(job_id) for job_id in ids],
    )
    # Given a batch parked "later" than the clock the admission pass reads
    park(rt, message, rt.now() + timedelta(seconds=5))
    forwarded: list[BatchMessage] = []
    # When the pass admits it
    assert admit_waiting(rt, keys_of(message), forwarded.append) == 1
    # Then its wait is zero and the message it forwards is valid as the crawl actor reads it
    (sent,) = forwarded
    assert sent.stages_ms["wait"] == 0
    assert BatchMessage.parse(sent.payload()).stages_ms["wait"] == 0
    assert sent.lease_ids

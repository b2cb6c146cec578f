"""Run-end notices through Apprise, end to end: a sweep runs on dramatiq workers (the real
RabbitMQ, or the in-process broker as the webhook tests use), its run ends, and the notices
its schedule names reach a local SMTP server and a local JSON receiver (Apprise's `json://`)
through the `deliver_webhook` actor and the deliveries outbox.

Every test counts what the receivers got, reads the stored documents and captures the logs
(structlog's and the standard library's, Apprise's included) to look for the secrets.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from dramatiq import Worker
from structlog.testing import capture_logs

from crawlsched.flow import schedule_ops
from crawlsched.runtime import Runtime, get_runtime
from tests.conftest import _broker_for, settings_for_tests
from tests.support.smtp_receiver import SmtpReceiver
from tests.support.waiting import wait_for
from tests.support.webhook_receiver import WebhookReceiver
from tests.test_admission_flow import SLOW, _fire_profiles, _setup, _twitter_jobs

SMTP_PASSWORD = "smtp-pw-7f3kq9"
JSON_PASSWORD = "json-pw-2x8vz4"


def _json_url(receiver: WebhookReceiver, user: str = "crawl", password: str = JSON_PASSWORD):
    return receiver.url.replace("http://", f"json://{user}:{password}@")


def _delivered_notices(rt: Runtime, n: int) -> list[dict]:
    def done():
        docs = list(rt.db.webhook_deliveries.find({"kind": "notice", "state": "delivered"}))
        return docs if len(docs) >= n else None

    return wait_for(done, 90, f"{n} notices to be delivered")


def _stored_text(rt: Runtime) -> str:
    return repr(list(rt.db.schedules.find({}))) + repr(list(rt.db.webhook_deliveries.find({})))


@pytest.fixture
def rabbitmq_pipeline(rabbitmq_url: str, embedded_mongo_url: str) -> Iterator:
    """The real RabbitMQ, the slow test driver, in-process worker threads."""
    broker = _broker_for(
        settings_for_tests(mongo_url=embedded_mongo_url, broker_url=rabbitmq_url, **SLOW)
    )
    worker = Worker(broker, worker_timeout=100, worker_threads=4)
    worker.start()
    yield broker, worker
    worker.stop()
    broker.flush_all()
    broker.close()


@pytest.mark.rabbitmq
def test_a_run_end_reaches_an_smtp_server_and_a_json_receiver_once_each(
    rabbitmq_pipeline, monkeypatch, caplog
):
    # Given a sweep of 6 profiles whose schedule names two notice targets: e-mail through a
    # local SMTP server that wants a password, and a JSON receiver behind basic auth
    monkeypatch.setenv("CRAWLSCHED_TEST_SLOW_DRIVER_S", "0.001")
    broker, worker = rabbitmq_pipeline
    rt = get_runtime()
    _setup(rt, accounts=1)
    _twitter_jobs(rt, 6, 0, "u")
    caplog.set_level(logging.DEBUG)
    with (
        SmtpReceiver("crawl", SMTP_PASSWORD) as smtp,
        WebhookReceiver() as receiver,
        capture_logs() as logs,
    ):
        schedule_ops.update(
            rt, "sweep-profiles", {"notices": [smtp.notice_url(), _json_url(receiver)]}
        )

        # When the sweep runs to its end
        _fire_profiles(rt)
        deliveries = _delivered_notices(rt, 2)
        broker.join("crawlsched.notify")
        worker.join()

        # Then each target got exactly one notice, with the schedule, result and counts
        (mail,) = smtp.received()
        assert smtp.logins == [("crawl", True)]
        assert mail["Subject"] == "crawlsched: sweep-profiles succeeded"
        assert mail["To"] == "ops@crawl.example"
        text = mail.get_payload()[0].get_payload(decode=True).decode()
        assert "schedule sweep-profiles ended: succeeded" in text and "succeeded 6" in text
        (post,) = receiver.posts
        assert post["status"] == 200
        assert post["body"]["title"] == "crawlsched: sweep-profiles succeeded"
        assert post["body"]["type"] == "success" and "succeeded 6" in post["body"]["message"]

        # And one delivery record per target, each delivered on its first try
        run = rt.db.runs.find_one({"schedule_id": "sweep-profiles"})
        assert sorted(d["_id"] for d in deliveries) == [
            f"{run['_id']}:RunFinished:notice:1",
            f"{run['_id']}:RunFinished:notice:2",
        ]
        assert [d["attempts"] for d in deliveries] == [1, 1]
        assert sorted(d["shown"] for d in deliveries) == [
            "json://127.0.0.1:" + receiver.url.split(":")[2].split("/")[0],
            f"mailto://crawl.example:{smtp.port}",
        ]

        # And a copy of a delivery's message, and the relay's next pass, send nothing more
        from crawlsched.actors.notifier import deliver_webhook
        from crawlsched.flow.coordination import announce

        for delivery in deliveries:
            deliver_webhook.send(delivery["_id"])
        announce(rt, run)  # as the relay would after a crash: the records exist already
        broker.join("crawlsched.notify")
        worker.join()
        assert len(smtp.received()) == 1 and len(receiver.posts) == 1
        assert rt.db.webhook_deliveries.count_documents({"kind": "notice"}) == 2

    # And no password is stored in the clear or logged, by us or by Apprise
    stored = _stored_text(rt)
    logged = repr(logs) + caplog.text
    assert "notice_delivered" in repr(logs) and "apprise" in caplog.text  # logs were captured
    for secret in (SMTP_PASSWORD, JSON_PASSWORD):
        assert secret not in stored
        assert secret not in logged


def test_a_receiver_that_fails_first_is_retried_and_gets_one_notice(
    stub_pipeline, monkeypatch, caplog
):
    # Given a JSON receiver that answers 500 to its first request
    monkeypatch.setenv("CRAWLSCHED_TEST_SLOW_DRIVER_S", "0.001")
    broker, worker = stub_pipeline(**SLOW)
    rt = get_runtime()
    _setup(rt, accounts=1)
    _twitter_jobs(rt, 4, 0, "u")
    caplog.set_level(logging.DEBUG)
    with WebhookReceiver(failures=1) as receiver, capture_logs() as logs:
        schedule_ops.update(rt, "sweep-profiles", {"notices": [_json_url(receiver)]})

        # When the sweep ends
        _fire_profiles(rt)
        (delivery,) = _delivered_notices(rt, 1)
        broker.join("crawlsched.notify")
        worker.join()

        # Then the notice was tried twice (dramatiq's retry, with backoff) and taken once
        assert [p["status"] for p in receiver.posts] == [500, 200]
        assert delivery["attempts"] == 2
        assert "JSON" in delivery["last_error"] or "500" in delivery["last_error"]
        failed = [e for e in logs if e["event"] == "notice_failed"]
        assert len(failed) == 1 and failed[0]["target"] == delivery["shown"]
    # And neither the record, its error nor any log holds the password
    assert JSON_PASSWORD not in _stored_text(rt)
    assert JSON_PASSWORD not in repr(logs) + caplog.text


def test_a_notice_to_a_refused_address_is_not_sent(stub_pipeline, monkeypatch):
    # Given a target allowed when it was set, on a network no longer allowed when it is sent
    monkeypatch.setenv("CRAWLSCHED_TEST_SLOW_DRIVER_S", "0.001")
    stub_pipeline(**SLOW)
    rt = get_runtime()
    _setup(rt, accounts=1)
    _twitter_jobs(rt, 2, 0, "u")
    with WebhookReceiver() as receiver:
        schedule_ops.update(rt, "sweep-profiles", {"notices": [_json_url(receiver)]})
        monkeypatch.setitem(rt.__dict__, "allowed_networks", ())
        _fire_profiles(rt)

        def tried():
            doc = rt.db.webhook_deliveries.find_one({"kind": "notice"})
            return doc if doc and doc.get("last_error") else None

        delivery = wait_for(tried, 60, "the notice's first try")
    # Then nothing reached the receiver, and the record says why (without the password)
    assert receiver.posts == []
    assert delivery["state"] == "pending"
    assert "CRAWLSCHED_TARGET_ALLOW_NETWORKS" in delivery["last_error"]
    assert JSON_PASSWORD not in delivery["last_error"]

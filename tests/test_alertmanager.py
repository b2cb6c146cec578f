"""A real alert through a real Alertmanager: a worker group stops, and the webhook hears of it.

A `dramatiq crawlsched.actors` group (its exporter on a loopback port), a real Prometheus with
the repository's alert rules, a real Alertmanager with the repository's config rendered by
alertmanager/render-config.sh, its webhook receiver an HTTP server in this test. Only timings
are rewritten, to seconds: the rules' `for:`, the scrape and evaluation intervals, and
Alertmanager's group_wait and group_interval. The alert must not fire while the group runs, and
must reach the receiver, firing, once it stopped.
"""

from __future__ import annotations

import contextlib
import re
import subprocess
import time

import httpx
import pytest
import yaml

from tests.support.alertmanager import AlertmanagerServer
from tests.support.deploy import REPO
from tests.support.mongo_server import fresh_database_name
from tests.support.prometheus import PrometheusServer
from tests.support.services import service_unavailable
from tests.support.waiting import wait_for
from tests.support.webhook_receiver import WebhookReceiver
from tests.support.workers import DramatiqWorkers, crawlsched_env

pytestmark = [pytest.mark.rabbitmq, pytest.mark.multiprocess]

WORKERS_JOB = "crawlsched-workers"
ALERT = "CrawlschedWorkerGroupGone"


def fast_rules() -> str:
    """prometheus/alerts.yml with every `for:` of minutes made as many seconds."""
    rules = (REPO / "prometheus" / "alerts.yml").read_text()
    fast, n = re.subn(r"(?m)^(\s+for: )(\d+)m$", r"\g<1>\2s", rules)
    assert n >= 4, "the rules' `for:` durations are no longer written in minutes"
    return fast


def fast_alertmanager_config(webhook_url: str) -> str:
    """alertmanager/alertmanager.yml rendered as compose renders it, grouping in a second."""
    rendered = subprocess.run(
        [
            "sh",
            str(REPO / "alertmanager" / "render-config.sh"),
            str(REPO / "alertmanager" / "alertmanager.yml"),
        ],
        env={"PATH": "/usr/bin:/bin", "ALERT_WEBHOOK_URL": webhook_url},
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    config = yaml.safe_load(rendered)
    config["route"].update(group_wait="1s", group_interval="1s")
    return yaml.safe_dump(config)


def _exporter_answers(address: str) -> bool:
    try:
        return httpx.get(f"http://{address}/metrics", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def _alerts(receiver: WebhookReceiver, status: str) -> list[dict]:
    return [
        alert
        for post in receiver.delivered()
        for alert in post["body"]["alerts"]
        if alert["labels"]["alertname"] == ALERT and alert["status"] == status
    ]


def test_a_stopped_worker_group_reaches_the_webhook_as_a_firing_alert(
    rabbitmq_url, multiprocess_mongo_url, tmp_path
):
    for server in (PrometheusServer, AlertmanagerServer):
        if not server.available():
            service_unavailable(
                f"{server.__name__}: binary missing (Debian prometheus, prometheus-alertmanager)"
            )
    env = crawlsched_env(rabbitmq_url, multiprocess_mongo_url, fresh_database_name("alertmanager"))
    worker_address = env["CRAWLSCHED_METRICS_ADDRESS"]
    with contextlib.ExitStack() as stack:
        receiver = stack.enter_context(WebhookReceiver())
        alertmanager = stack.enter_context(
            AlertmanagerServer(fast_alertmanager_config(receiver.url))
        )
        workers = stack.enter_context(DramatiqWorkers(env, processes=1, threads=1))
        # The group's exporter answers before Prometheus starts: never seen down before the stop.
        wait_for(lambda: _exporter_answers(worker_address), 60, "the group's exporter")
        prometheus = stack.enter_context(
            PrometheusServer(
                {WORKERS_JOB: [worker_address]},
                rules=fast_rules(),
                alertmanagers=[alertmanager.address],
            )
        )
        try:
            # Given Prometheus sees the group up, and has sent Alertmanager an alert that does
            # fire (no clock runs: no tick), which the webhook received: the chain works
            wait_for(
                lambda: prometheus.value(f'up{{job="{WORKERS_JOB}"}}') == 1,
                30,
                "Prometheus to scrape the group",
            )
            wait_for(
                lambda: any(
                    a["labels"]["alertname"] == "CrawlschedNoTick"
                    for post in receiver.delivered()
                    for a in post["body"]["alerts"]
                ),
                60,
                "CrawlschedNoTick at the webhook",
            )
            assert _alerts(receiver, "firing") == []
            # When the group stops
            stopped_at = time.monotonic()
            workers.stop()
            # Then the webhook is told, firing
            fired = wait_for(lambda: _alerts(receiver, "firing"), 120, f"{ALERT} at the webhook")
            took = time.monotonic() - stopped_at
        except AssertionError:
            print("alertmanager:", alertmanager.output())
            print("worker:", workers.output()[-3000:])
            raise
    alert = fired[0]
    assert alert["labels"]["severity"] == "critical"
    assert alert["labels"]["job"] == WORKERS_JOB
    assert alert["annotations"]["summary"] == "A dramatiq worker group is gone"
    print(f"{ALERT} reached the webhook {took:.1f}s after the group stopped")

"""The deployment files as the tests read them: dashboards' queries and alert rules' expressions
(the originals, or the copies deploy/kubernetes keeps: pass their paths), and docker-compose.yml
as `docker-compose config` resolves it."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
DASHBOARDS = sorted((REPO / "grafana" / "dashboards").glob("*.json"))
DATASOURCES = REPO / "grafana" / "provisioning" / "datasources" / "prometheus.yml"
ALERTS = REPO / "prometheus" / "alerts.yml"
# A metric name in a PromQL expression: crawlsched's own, or dramatiq's actor metrics.
METRIC_NAME = re.compile(r"\b(?:crawlsched|dramatiq)_[a-z0-9_]+")


def load_dashboard(path: Path) -> dict:
    return json.loads(path.read_text())


def dashboard_queries(dashboards: list[Path] = DASHBOARDS) -> list[tuple[str, str]]:
    """(where, PromQL) for every target of every panel."""
    return [
        (f"{path.name}: {panel['title']}", target.get("expr", ""))
        for path in dashboards
        for panel in load_dashboard(path)["panels"]
        for target in panel.get("targets", [])
    ]


def rule_expressions(alerts: Path = ALERTS) -> list[tuple[str, str]]:
    """(where, PromQL) for every rule of a Prometheus rules file, or of a PrometheusRule (the
    same groups, under `spec`)."""
    document = yaml.safe_load(alerts.read_text())
    rules = document["spec"] if document.get("kind") == "PrometheusRule" else document
    return [
        (f"{alerts.name}: {rule['alert']}", rule["expr"])
        for group in rules["groups"]
        for rule in group["rules"]
    ]


COMPOSE_FILE = REPO / "docker-compose.yml"
# What docker-compose.yml requires from the environment, for `docker-compose config`.
COMPOSE_ENV = {
    "RABBITMQ_PASSWORD": "test-password",
    "MONGO_ROOT_PASSWORD": "test-mongo-password",
    "CRAWLSCHED_SECRET_KEY": "test-key",
    "CRAWLSCHED_MESSAGE_SIGNING_KEY": "test-signing-key-" + "k" * 32,
    "GRAFANA_ADMIN_PASSWORD": "test-admin",
    "ALERT_WEBHOOK_URL": "http://alerts.example/hook",
}


def compose_config(env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`docker-compose config` of docker-compose.yml (the file with variables substituted)."""
    return subprocess.run(
        ["docker-compose", "-f", str(COMPOSE_FILE), "config"],
        capture_output=True,
        text=True,
        env={**os.environ, **(COMPOSE_ENV if env is None else env)},
        timeout=60,
        check=False,
    )

"""The deployment files as the tests read them: dashboards' queries and alert rules' expressions."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
DASHBOARDS = sorted((REPO / "grafana" / "dashboards").glob("*.json"))
DATASOURCES = REPO / "grafana" / "provisioning" / "datasources" / "prometheus.yml"


def load_dashboard(path: Path) -> dict:
    return json.loads(path.read_text())


def dashboard_queries() -> list[tuple[str, str]]:
    """(where, PromQL) for every target of every panel."""
    return [
        (f"{path.name}: {panel['title']}", target.get("expr", ""))
        for path in DASHBOARDS
        for panel in load_dashboard(path)["panels"]
        for target in panel.get("targets", [])
    ]


def rule_expressions() -> list[tuple[str, str]]:
    rules = yaml.safe_load((REPO / "prometheus" / "alerts.yml").read_text())
    return [
        (f"alerts.yml: {rule['alert']}", rule["expr"])
        for group in rules["groups"]
        for rule in group["rules"]
    ]

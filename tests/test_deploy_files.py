"""The deployment files: Grafana dashboards and provisioning, Prometheus config and alert rules,
docker-compose.yml and the Dockerfile. (That every metric they name is really exported is
checked against a real scrape in test_metrics_prometheus.)"""

from __future__ import annotations

import copy
import json
import re
import shutil

import pytest
import yaml

from tests.support.deploy import (
    DASHBOARDS,
    DATASOURCES,
    REPO,
    load_dashboard,
    rule_expressions,
)
from tests.support.deploy import compose_config as deploy_config
from tests.support.prometheus import promtool
from tests.support.services import service_unavailable

GRID_WIDTH = 24
PANEL_TYPES = {"timeseries", "stat", "gauge", "bargauge", "table", "heatmap", "text"}


def dashboard_problems(dashboard: dict, datasource_uids: set[str]) -> list[str]:
    """What would stop Grafana importing this dashboard, or leave a panel blank."""
    problems = []
    for field, kind in (("uid", str), ("title", str), ("schemaVersion", int), ("panels", list)):
        if not isinstance(dashboard.get(field), kind):
            problems.append(f"{field} missing or not {kind.__name__}")
    if not re.fullmatch(r"[A-Za-z0-9_-]{1,40}", str(dashboard.get("uid", ""))):
        problems.append(f"uid {dashboard.get('uid')!r}: 1-40 of [A-Za-z0-9_-]")
    if not {"from", "to"} <= set(dashboard.get("time", {})):
        problems.append("time range needs from and to")
    ids = [panel.get("id") for panel in dashboard.get("panels", [])]
    if len(ids) != len(set(ids)) or not all(isinstance(i, int) for i in ids):
        problems.append(f"panel ids must be unique integers: {ids}")
    for panel in dashboard.get("panels", []):
        where = f"panel {panel.get('id')} {panel.get('title')!r}"
        if panel.get("type") not in PANEL_TYPES:
            problems.append(f"{where}: unknown type {panel.get('type')!r}")
        if not panel.get("title"):
            problems.append(f"{where}: no title")
        grid = panel.get("gridPos", {})
        if not all(isinstance(grid.get(k), int) for k in "hwxy"):
            problems.append(f"{where}: gridPos needs integer h, w, x, y")
        elif grid["x"] + grid["w"] > GRID_WIDTH or grid["w"] < 1 or grid["h"] < 1:
            problems.append(f"{where}: gridPos outside the 24-column grid")
        if panel.get("datasource", {}).get("uid") not in datasource_uids:
            problems.append(f"{where}: datasource is not the provisioned one")
        targets = panel.get("targets") or []
        if not targets:
            problems.append(f"{where}: no query")
        refs = [t.get("refId") for t in targets]
        if len(refs) != len(set(refs)) or not all(refs):
            problems.append(f"{where}: refIds must be unique and set")
        for target in targets:
            if not str(target.get("expr", "")).strip():
                problems.append(f"{where}: empty query ({target.get('refId')})")
    return problems


def provisioned_uids() -> set[str]:
    config = yaml.safe_load(DATASOURCES.read_text())
    return {source["uid"] for source in config["datasources"] if source["type"] == "prometheus"}


def test_dashboards_are_four_and_importable():
    assert [p.stem for p in DASHBOARDS] == ["crawling", "overview", "queues", "resources"]
    uids = provisioned_uids()
    assert uids == {"prometheus"}
    for path in DASHBOARDS:
        assert dashboard_problems(load_dashboard(path), uids) == [], path.name
    assert len({load_dashboard(p)["uid"] for p in DASHBOARDS}) == 4


def test_dashboard_check_fails_on_a_panel_with_an_empty_query():
    dashboard = load_dashboard(DASHBOARDS[0])
    broken = copy.deepcopy(dashboard)
    broken["panels"][1]["targets"][0]["expr"] = "  "
    problems = dashboard_problems(broken, provisioned_uids())
    assert len(problems) == 1 and "empty query" in problems[0]
    no_targets = copy.deepcopy(dashboard)
    no_targets["panels"][0]["targets"] = []
    assert any("no query" in p for p in dashboard_problems(no_targets, provisioned_uids()))


def test_grafana_dashboards_provider_points_where_compose_mounts_them():
    provider = yaml.safe_load(
        (REPO / "grafana" / "provisioning" / "dashboards" / "crawlsched.yml").read_text()
    )["providers"][0]
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    mounts = compose["services"]["grafana"]["volumes"]
    assert f"./grafana/dashboards:{provider['options']['path']}:ro" in mounts


def _need_promtool() -> None:
    if shutil.which("promtool") is None:
        service_unavailable("promtool is not installed (Debian package prometheus)")


def test_promtool_accepts_the_alert_rules_and_the_config():
    _need_promtool()
    rules = promtool("check", "rules", str(REPO / "prometheus" / "alerts.yml"))
    assert rules.returncode == 0, rules.stdout + rules.stderr
    assert "SUCCESS: 6 rules found" in rules.stdout
    config = promtool("check", "config", str(REPO / "prometheus" / "prometheus.yml"))
    assert config.returncode == 0, config.stdout + config.stderr


def test_alert_rules_are_the_six_the_operators_asked_for():
    names = [where.removeprefix("alerts.yml: ") for where, _ in rule_expressions()]
    assert names == [
        "CrawlschedScheduleLagHigh",
        "CrawlschedPoolStarved",
        "CrawlschedAllNodesDown",
        "CrawlschedJobsExhausted",
        "CrawlschedNoTick",
        "CrawlschedWorkerGroupGone",
    ]


@pytest.fixture(scope="module")
def compose_config() -> dict:
    if shutil.which("docker-compose") is None:
        service_unavailable("docker-compose is not installed (Debian package docker-compose)")
    result = deploy_config()
    assert result.returncode == 0, result.stderr
    return yaml.safe_load(result.stdout)


def test_compose_file_validates_and_has_every_service(compose_config):
    services = compose_config["services"]
    assert set(services) == {
        "mongo",
        "rabbitmq",
        "selenium-hub",
        "chrome-1",
        "chrome-2",
        "init-db",
        "worker",
        "clock",
        "api",
        "prometheus",
        "grafana",
        "alertmanager",
        "mongo-backup",
        "mongodb-exporter",
    }
    assert services["rabbitmq"]["image"].endswith("-management")
    assert services["init-db"]["restart"] == "no"
    for name in ("worker", "clock", "api"):
        assert services[name]["restart"] == "unless-stopped"
        assert services[name]["depends_on"]["init-db"]["condition"] == (
            "service_completed_successfully"
        )


def test_compose_worker_scales_and_is_scraped_per_replica(compose_config):
    # --scale worker=4 needs no fixed container name and no host port per replica.
    worker = compose_config["services"]["worker"]
    assert "container_name" not in worker and "ports" not in worker
    assert worker["environment"]["CRAWLSCHED_METRICS_ADDRESS"] == "0.0.0.0:9191"
    prometheus = yaml.safe_load((REPO / "prometheus" / "prometheus.yml").read_text())
    jobs = {job["job_name"]: job for job in prometheus["scrape_configs"]}
    discovery = jobs["crawlsched-workers"]["dns_sd_configs"][0]
    assert discovery["names"] == ["worker"] and discovery["port"] == 9191
    # Two clock replicas: each is a target of its own, found like the workers.
    clock = compose_config["services"]["clock"]
    clock_port = clock["environment"]["CRAWLSCHED_CLOCK_METRICS_ADDRESS"].rpartition(":")[2]
    assert "ports" not in clock and clock["deploy"]["replicas"] == 2
    discovery = jobs["crawlsched-clock"]["dns_sd_configs"][0]
    assert discovery["names"] == ["clock"] and discovery["port"] == int(clock_port)


def _dockerfile_cmd() -> list[str]:
    for line in (REPO / "Dockerfile").read_text().splitlines():
        if line.startswith(("CMD ", "ENTRYPOINT ")):
            return json.loads(line.split(" ", 1)[1])
    raise AssertionError("the Dockerfile has no CMD")


def test_dockerfile_and_compose_commands_are_the_ones_the_readme_documents(compose_config):
    readme = (REPO / "README.md").read_text()
    production = readme.split("## Running in production", 1)[1].split("\n## ", 1)[0]
    documented = {line.strip() for line in production.splitlines()}
    commands = [_dockerfile_cmd()] + [
        service["command"]
        for service in compose_config["services"].values()
        if service.get("image") == "crawlsched:latest"
    ]
    assert len(commands) == 5
    for command in commands:
        assert " ".join(command) in documented, " ".join(command)
    assert "ENTRYPOINT" not in (REPO / "Dockerfile").read_text()


def test_compose_requires_a_message_signing_key_for_every_crawlsched_service():
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    env = compose["x-crawlsched"]["environment"]
    assert env["CRAWLSCHED_MESSAGE_SIGNING_KEY"].startswith("${CRAWLSCHED_MESSAGE_SIGNING_KEY:?")
    for name in ("worker", "clock", "init-db", "api"):
        service = compose["services"][name]
        assert (
            service["environment"]["CRAWLSCHED_MESSAGE_SIGNING_KEY"]
            == env["CRAWLSCHED_MESSAGE_SIGNING_KEY"]
        ), name


def test_compose_api_service_is_checked_on_its_health_route(compose_config):
    api = compose_config["services"]["api"]
    assert api["command"][:3] == ["crawlsched", "api", "serve"]
    port = api["command"][api["command"].index("--port") + 1]
    check = " ".join(api["healthcheck"]["test"])
    assert f"http://127.0.0.1:{port}/health" in check
    # published on this host only: the status page and the API are behind a token, not open
    assert [str(p).split(":")[0] for p in api["ports"]] == ["127.0.0.1"]
    assert api["depends_on"]["init-db"]["condition"] == "service_completed_successfully"
    assert compose_config["services"]["worker"]["environment"]["CRAWLSCHED_BROKER_SPREAD"]

"""The Kubernetes bundle (deploy/kubernetes): both overlays render with `kubectl kustomize`; the
built-in resources validate strictly against Kubernetes' schemas and the custom ones against
their CRDs (kept in deploy/kubernetes/crds); what the manifests say agrees with the code (queue
names, settings, metrics, the crawl time limit); and the copies of the dashboards and alert rules
are those of grafana/ and prometheus/. Offline: nothing is applied to a cluster."""

from __future__ import annotations

import copy
import importlib.machinery
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from functools import cache
from ipaddress import ip_address, ip_network
from pathlib import Path
from unittest import mock

import jsonschema
import kubernetes_validate
import pytest
import yaml

from crawlsched.actors.handlers import QUEUES
from crawlsched.reference import load_reference
from crawlsched.settings import Settings
from tests.support.deploy import METRIC_NAME, REPO, dashboard_queries, rule_expressions
from tests.support.services import service_unavailable

BUNDLE = REPO / "deploy" / "kubernetes"
OVERLAYS = ("small", "large")
CRDS = BUNDLE / "crds"
OBSERVABILITY = BUNDLE / "base" / "observability"
# The oldest Kubernetes the bundle is meant for (the schemas kubernetes-validate checks against).
KUBERNETES_VERSION = "1.30.0"
BUILT_IN_GROUPS = {"v1", "apps/v1", "batch/v1", "policy/v1", "networking.k8s.io/v1"}
WORKER_CLASSES = ("crawl-http", "crawl-browser", "control")
# The CRDs are large (the RabbitmqCluster one is 350 kB): libyaml reads them ten times faster.
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


# ---- rendering -----------------------------------------------------------------------------


def render(overlay: Path) -> list[dict]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        service_unavailable(
            "kubectl (>= 1.21, for its kustomize) is not installed: it renders the overlays"
        )
    result = subprocess.run(
        [kubectl, "kustomize", str(overlay)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.load_all(result.stdout, Loader=LOADER) if doc]


@pytest.fixture(scope="module")
def rendered() -> dict[str, list[dict]]:
    return {name: render(BUNDLE / "overlays" / name) for name in OVERLAYS}


def find(resources: list[dict], kind: str, name: str) -> dict:
    matches = [r for r in resources if r["kind"] == kind and r["metadata"]["name"] == name]
    assert len(matches) == 1, f"{kind}/{name}: {len(matches)} found"
    return matches[0]


def pod_specs(resources: list[dict]) -> Iterator[tuple[str, dict]]:
    for r in resources:
        if r["kind"] in ("Deployment", "Job"):
            yield f"{r['kind']}/{r['metadata']['name']}", r["spec"]["template"]["spec"]


def crawlsched_containers(resources: list[dict]) -> Iterator[tuple[str, dict]]:
    for where, spec in pod_specs(resources):
        for container in spec["containers"]:
            if container["image"].rpartition(":")[0].endswith("/crawlsched"):
                yield f"{where}/{container['name']}", container


def worker_queues(deployment: dict) -> list[str]:
    command = deployment["spec"]["template"]["spec"]["containers"][0]["command"]
    assert command[:2] == ["dramatiq", "crawlsched.actors"], command
    return command[command.index("--queues") + 1 :]


def flag(command: list[str], name: str) -> int:
    return int(command[command.index(name) + 1])


def env_value(container: dict, name: str) -> str | None:
    return next((e.get("value") for e in container.get("env", []) if e["name"] == name), None)


def configured(resources: list[dict]) -> Settings:
    """The Settings a crawlsched pod reads from the rendered config ConfigMap (which must parse,
    as every process parses it at start)."""
    config = next(
        r for r in resources if r["kind"] == "ConfigMap" and "CRAWLSCHED_MONGO_DB" in r["data"]
    )
    environ = {k: v for k, v in os.environ.items() if not k.startswith("CRAWLSCHED_")}
    with mock.patch.dict(os.environ, {**environ, **config["data"]}, clear=True):
        return Settings()


def test_both_overlays_render_the_same_kinds_of_resources(rendered):
    for name, resources in rendered.items():
        kinds = {r["kind"] for r in resources}
        assert {"Deployment", "ScaledObject", "NetworkPolicy", "PodDisruptionBudget"} <= kinds
        assert all(
            r["metadata"].get("namespace") == "crawlsched"
            for r in resources
            if r["kind"] != "Namespace"
        ), name
    small, large = ({(r["kind"], r["metadata"]["name"]) for r in rendered[n]} for n in OVERLAYS)
    assert small == large


# ---- schemas -------------------------------------------------------------------------------


def test_every_built_in_resource_validates_strictly(rendered):
    checked = 0
    for resources in rendered.values():
        for resource in resources:
            if resource["apiVersion"] in BUILT_IN_GROUPS:
                kubernetes_validate.validate(resource, KUBERNETES_VERSION, strict=True)
                checked += 1
    assert checked > 40


def test_strict_validation_rejects_a_misspelt_field(rendered):
    deployment = copy.deepcopy(find(rendered["small"], "Deployment", "crawlsched-api"))
    deployment["spec"]["template"]["spec"]["containers"][0]["livenesProbe"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, KUBERNETES_VERSION, strict=True)


def strict_schema(schema: dict) -> dict:
    """A CRD's openAPIV3Schema as the API server applies it with strict field validation
    (`kubectl apply --validate=strict`): an unknown field is an error, not silently pruned;
    `nullable` allows null."""
    schema = dict(schema)
    if "properties" in schema:
        schema["properties"] = {k: strict_schema(v) for k, v in schema["properties"].items()}
        if "additionalProperties" not in schema and not schema.get(
            "x-kubernetes-preserve-unknown-fields"
        ):
            schema["additionalProperties"] = False
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            schema[key] = strict_schema(schema[key])
    for key in ("anyOf", "allOf", "oneOf"):
        if key in schema:
            schema[key] = [strict_schema(s) for s in schema[key]]
    if schema.get("nullable") and "type" in schema:
        schema["type"] = [schema["type"], "null"]
    return schema


@cache
def crd_validators() -> dict[tuple[str, str], jsonschema.Validator]:
    """(apiVersion, kind) -> a validator of that version's schema, for every CRD kept."""
    validators = {}
    for path in sorted(CRDS.glob("*.yaml")):
        crd = yaml.load(path.read_text(), Loader=LOADER)
        assert crd["kind"] == "CustomResourceDefinition", path.name
        group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
        for version in crd["spec"]["versions"]:
            schema = strict_schema(version["schema"]["openAPIV3Schema"])
            validators[(f"{group}/{version['name']}", kind)] = jsonschema.Draft7Validator(schema)
    return validators


def crd_errors(resource: dict) -> list[str]:
    validator = crd_validators().get((resource["apiVersion"], resource["kind"]))
    if validator is None:
        return [f"no CRD kept for {resource['apiVersion']} {resource['kind']}"]
    return [
        f"{resource['kind']}/{resource['metadata']['name']} {'/'.join(map(str, e.path))}: "
        f"{e.message}"
        for e in validator.iter_errors(resource)
    ]


def test_every_custom_resource_validates_against_its_crd(rendered):
    kinds = set()
    for resources in rendered.values():
        for resource in resources:
            if resource["apiVersion"] not in BUILT_IN_GROUPS:
                assert crd_errors(resource) == []
                kinds.add(resource["kind"])
    assert kinds == {
        "ScaledObject",
        "TriggerAuthentication",
        "PodMonitor",
        "PrometheusRule",
        "RabbitmqCluster",
        "MongoDBCommunity",
    }


def test_crd_check_rejects_a_wrong_type_and_an_unknown_field(rendered):
    scaled = copy.deepcopy(find(rendered["small"], "ScaledObject", "crawlsched-crawl-http"))
    scaled["spec"]["maxReplicaCount"] = "ten"
    assert (
        len(crd_errors(scaled)) == 1 and "'ten' is not of type 'integer'" in crd_errors(scaled)[0]
    )
    scaled = copy.deepcopy(find(rendered["small"], "ScaledObject", "crawlsched-crawl-http"))
    scaled["spec"]["cooldownPeriods"] = 900
    assert len(crd_errors(scaled)) == 1 and "cooldownPeriods" in crd_errors(scaled)[0]


def test_every_crd_kept_has_its_licence_and_source_beside_it():
    notice = (CRDS / "NOTICE.md").read_text()
    for path in CRDS.glob("*.yaml"):
        assert path.name in notice, f"{path.name}: not named in crds/NOTICE.md"
    for licence in re.findall(r"\((LICENSE\.[\w.-]+|APACHE2\.[\w.-]+)\)", notice):
        assert (CRDS / licence).is_file(), licence


# ---- what the manifests say agrees with the code -------------------------------------------


def test_worker_classes_consume_every_queue_once(rendered):
    # Given the queues each worker class's dramatiq command names
    resources = rendered["small"]
    by_class = {
        c: worker_queues(find(resources, "Deployment", f"crawlsched-{c}")) for c in WORKER_CLASSES
    }
    # Then every queue an actor consumes has exactly one class
    every = [q for queues in by_class.values() for q in queues]
    assert sorted(every) == sorted(QUEUES)
    # And the browser class has the crawl queues of the tasks some media runs in a browser
    browser_tasks = {
        task
        for media in load_reference().media
        for task, row in media.tasks.items()
        if row.need_selenium
    }
    assert set(by_class["crawl-browser"]) == {f"crawlsched.crawl.{t}" for t in browser_tasks}
    assert all(q.startswith("crawlsched.crawl.") for q in by_class["crawl-http"])
    assert not any(q.startswith("crawlsched.crawl.") for q in by_class["control"])


def test_each_class_scales_on_the_queues_it_consumes(rendered):
    for overlay, resources in rendered.items():
        limit = configured(resources).crawl_time_limit_s
        for worker_class in WORKER_CLASSES:
            name = f"crawlsched-{worker_class}"
            scaled = find(resources, "ScaledObject", name)
            assert scaled["spec"]["scaleTargetRef"]["name"] == name
            triggers = scaled["spec"]["triggers"]
            queues = [t["metadata"]["queueName"] for t in triggers]
            assert queues == worker_queues(find(resources, "Deployment", name)), overlay
            for trigger in triggers:
                assert trigger["type"] == "rabbitmq"
                assert trigger["metadata"]["mode"] == "QueueLength"
                assert int(trigger["metadata"]["value"]) > 0
                assert "activationValue" in trigger["metadata"]
                auth = find(
                    resources, "TriggerAuthentication", trigger["authenticationRef"]["name"]
                )
                secret = auth["spec"]["secretTargetRef"][0]["name"]
                assert find(resources, "Secret", secret)
            modifiers = scaled["spec"]["advanced"]["scalingModifiers"]
            assert modifiers["formula"] == " + ".join(t["name"] for t in triggers)
            # Not scaled away while a batch may still run.
            assert scaled["spec"]["cooldownPeriod"] > limit
            behaviour = scaled["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
            assert behaviour["scaleDown"]["stabilizationWindowSeconds"] > limit
        assert (
            find(resources, "ScaledObject", "crawlsched-crawl-browser")["spec"]["minReplicaCount"]
            == 0
        )
        assert find(resources, "ScaledObject", "crawlsched-control")["spec"]["minReplicaCount"] >= 1


def test_workers_prefetch_no_more_than_one_message_per_thread(rendered):
    for worker_class in WORKER_CLASSES:
        container = find(rendered["small"], "Deployment", f"crawlsched-{worker_class}")["spec"][
            "template"
        ]["spec"]["containers"][0]
        threads = flag(container["command"], "--threads")
        assert 1 <= int(env_value(container, "dramatiq_queue_prefetch") or 0) <= threads


def test_rabbitmq_keeps_an_unacknowledged_crawl_longer_than_it_may_wait_and_run(rendered):
    for resources in rendered.values():
        limit_ms = configured(resources).crawl_time_limit_s * 1000
        rabbit = find(resources, "RabbitmqCluster", "crawlsched-rabbitmq")
        config = dict(
            line.split(" = ", 1)
            for line in rabbit["spec"]["rabbitmq"]["additionalConfig"].splitlines()
        )
        # A crawl worker holds one message per thread per queue: a message may wait behind one
        # batch per other queue before its own run.
        most_queues = max(
            len(worker_queues(find(resources, "Deployment", f"crawlsched-{c}")))
            for c in ("crawl-http", "crawl-browser")
        )
        assert int(config["consumer_timeout"]) > most_queues * limit_ms
        assert rabbit["spec"]["replicas"] == 3
        assert configured(resources).queue_type == "quorum"


def test_pods_drain_within_their_grace_period_and_probe_the_heartbeat(rendered):
    for resources in rendered.values():
        for where, spec in pod_specs(resources):
            for container in spec["containers"]:
                drain = env_value(container, "CRAWLSCHED_DRAIN_S")
                if drain is not None:
                    assert spec["terminationGracePeriodSeconds"] > float(drain), where
                    shutdown_ms = flag(container["command"], "--worker-shutdown-timeout")
                    assert float(drain) < shutdown_ms / 1000 < spec["terminationGracePeriodSeconds"]
                heartbeat = env_value(container, "CRAWLSCHED_WORKER_HEARTBEAT_FILE")
                if heartbeat is None:
                    continue
                assert heartbeat == "/tmp/crawlsched/heartbeat", where
                mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
                volume = next(v for v in spec["volumes"] if v["name"] == mounts["/tmp/crawlsched"])
                assert "emptyDir" in volume, where
                probe = container["livenessProbe"]["exec"]["command"]
                assert probe == ["python", "-m", "crawlsched.probe", "live"], where
                if "readinessProbe" in container:
                    ready = container["readinessProbe"]["exec"]["command"]
                    assert ready == ["python", "-m", "crawlsched.probe", "ready"], where
        workers = [find(resources, "Deployment", f"crawlsched-{c}") for c in WORKER_CLASSES]
        assert all(
            env_value(w["spec"]["template"]["spec"]["containers"][0], "CRAWLSCHED_DRAIN_S")
            for w in workers
        )
        api = find(resources, "Deployment", "crawlsched-api")["spec"]["template"]["spec"]
        assert api["containers"][0]["readinessProbe"]["httpGet"]["path"] == "/health"
        assert api["containers"][0]["lifecycle"]["preStop"]["exec"]["command"][0] == "sleep"
        assert find(resources, "Deployment", "crawlsched-clock")["spec"]["replicas"] == 2


def crawlsched_variables(resources: list[dict]) -> dict[str, set[str]]:
    """Every CRAWLSCHED_* variable a crawlsched container gets, and from where."""
    found: dict[str, set[str]] = {}
    by_name = {(r["kind"], r["metadata"]["name"]): r for r in resources}
    for where, container in crawlsched_containers(resources):
        names = [e["name"] for e in container.get("env", [])]
        for source in container.get("envFrom", []):
            for kind in ("ConfigMap", "Secret"):
                ref = source.get(f"{kind[0].lower()}{kind[1:]}Ref")
                if ref:
                    data = by_name[(kind, ref["name"])]
                    names += [*data.get("data", {}), *data.get("stringData", {})]
        for name in names:
            if name.startswith("CRAWLSCHED_"):
                found.setdefault(name, set()).add(where)
    return found


def settings_variables() -> set[str]:
    """The variables Settings reads: each field's name (or its alias) after the prefix."""
    prefix = Settings.model_config["env_prefix"]
    names = set()
    for name, field in Settings.model_fields.items():
        alias = field.validation_alias or field.alias
        names.add(alias.upper() if isinstance(alias, str) else f"{prefix}{name}".upper())
    return names


def unknown_variables(resources: list[dict]) -> dict[str, list[str]]:
    known = settings_variables()
    return {
        name: sorted(where)
        for name, where in crawlsched_variables(resources).items()
        if name not in known
    }


def test_every_crawlsched_variable_set_is_a_setting(rendered):
    for resources in rendered.values():
        assert len(crawlsched_variables(resources)) > 10
        assert unknown_variables(resources) == {}


def test_settings_check_rejects_an_unknown_variable(rendered):
    resources = copy.deepcopy(rendered["small"])
    api = find(resources, "Deployment", "crawlsched-api")["spec"]["template"]["spec"]
    api["containers"][0]["env"].append({"name": "CRAWLSCHED_CRAWL_TIME_LIMIT", "value": "60"})
    assert "CRAWLSCHED_CRAWL_TIME_LIMIT" in unknown_variables(resources)


def test_every_probe_module_exists(rendered):
    # The probes exec `python -m crawlsched.probe ...`: a module that is not there would fail
    # every liveness probe and restart every worker for ever.
    modules = {
        c[c.index("-m") + 1]
        for _, container in crawlsched_containers(rendered["small"])
        for probe in ("livenessProbe", "readinessProbe", "startupProbe")
        if "exec" in container.get(probe, {})
        for c in [container[probe]["exec"]["command"]]
    }
    assert modules == {"crawlsched.probe"}
    assert importlib.util.find_spec("crawlsched.probe") is not None


def test_every_container_has_requests_and_limits_and_a_pinned_image(rendered):
    for overlay, resources in rendered.items():
        for where, spec in pod_specs(resources):
            for container in spec["containers"]:
                resources_ = container.get("resources", {})
                assert {"cpu", "memory"} <= set(resources_.get("requests", {})), where
                assert {"cpu", "memory"} <= set(resources_.get("limits", {})), where
                image = container["image"]
                assert re.search(r":[\w.-]+$", image) and not image.endswith(":latest"), image
        operator_images = [
            find(resources, "RabbitmqCluster", "crawlsched-rabbitmq")["spec"]["image"]
        ]
        assert all(not i.endswith(":latest") for i in operator_images), overlay


def test_the_large_overlay_allows_more_than_the_small_one(rendered):
    small, large = rendered["small"], rendered["large"]
    for worker_class in WORKER_CLASSES:
        name = f"crawlsched-{worker_class}"
        assert (
            find(large, "ScaledObject", name)["spec"]["maxReplicaCount"]
            > find(small, "ScaledObject", name)["spec"]["maxReplicaCount"]
        )
    chrome = ("Deployment", "selenium-chrome")
    assert find(large, *chrome)["spec"]["replicas"] > find(small, *chrome)["spec"]["replicas"]


def test_selenium_nodes_end_idle_sessions_and_are_recycled(rendered):
    chrome = find(rendered["small"], "Deployment", "selenium-chrome")
    env = {
        e["name"]: e.get("value")
        for e in chrome["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert int(env["SE_NODE_SESSION_TIMEOUT"]) > configured(rendered["small"]).page_load_timeout_s
    assert int(env["SE_DRAIN_AFTER_SESSION_COUNT"]) > 0


def internet_rules(policy: dict) -> list[dict]:
    return [
        peer["ipBlock"]
        for rule in policy["spec"].get("egress", [])
        for peer in rule.get("to", [])
        if "ipBlock" in peer and peer["ipBlock"]["cidr"] in ("0.0.0.0/0", "::/0")
    ]


def reachable(blocks: list[dict], address: str) -> bool:
    ip = ip_address(address)
    return any(
        ip in ip_network(block["cidr"])
        and not any(ip in ip_network(e) for e in block.get("except", []))
        for block in blocks
        if ip_network(block["cidr"]).version == ip.version
    )


@pytest.mark.parametrize(
    ("address", "allowed"),
    [
        ("93.184.215.14", True),
        ("2606:2800:21f:cb07:6820:80da:af6b:8b2c", True),
        ("169.254.169.254", False),
        ("10.96.0.1", False),
        ("172.20.3.4", False),
        ("192.168.1.1", False),
        ("100.100.100.200", False),
        ("127.0.0.1", False),
        ("fd00:ec2::254", False),
    ],
)
def test_workers_and_browsers_reach_the_internet_but_no_private_address(rendered, address, allowed):
    resources = rendered["small"]
    for name in ("crawlsched-workers-internet", "selenium-chrome"):
        blocks = internet_rules(find(resources, "NetworkPolicy", name))
        assert blocks and reachable(blocks, address) is allowed, (name, address)
    # Nothing else opens the internet to a crawlsched pod.
    others = [
        r
        for r in resources
        if r["kind"] == "NetworkPolicy"
        and r["metadata"]["name"] not in ("crawlsched-workers-internet", "selenium-chrome")
    ]
    assert not any(internet_rules(p) for p in others)


# ---- dashboards and alert rules ------------------------------------------------------------


def sync_script():
    path = REPO / "scripts" / "sync-kubernetes-config"
    loader = importlib.machinery.SourceFileLoader("sync_kubernetes_config", str(path))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def test_dashboard_and_alert_copies_are_the_originals():
    result = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "sync-kubernetes-config"), "--check"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr


def test_copy_check_fails_on_a_stale_copy(tmp_path):
    # Given a repository whose copies were synced, then an alert changed upstream
    for part in ("grafana/dashboards", "prometheus"):
        shutil.copytree(REPO / part, tmp_path / part)
    sync = sync_script()
    sync.sync(tmp_path)
    assert sync.differences(tmp_path) == []
    alerts = tmp_path / "prometheus" / "alerts.yml"
    alerts.write_text(alerts.read_text().replace("for: 10m", "for: 11m", 1))
    (tmp_path / "grafana" / "dashboards" / "queues.json").unlink()
    # Then the check names both
    assert sorted(sync.differences(tmp_path)) == [
        f"{sync.TARGET}/dashboards/queues.json: no original (removed upstream?)",
        f"{sync.TARGET}/kustomization.yaml: differs from its original",
        f"{sync.TARGET}/prometheus-rule.yaml: differs from its original",
    ]


@cache
def defined_metric_names() -> frozenset[str]:
    """Every metric name the code registers: crawlsched's (string literals in crawlsched/metrics)
    and dramatiq's actor metrics (its Prometheus middleware, which crawlsched subclasses)."""
    import dramatiq.middleware.prometheus as dramatiq_prometheus

    sources = [
        *sorted((REPO / "crawlsched" / "metrics").glob("*.py")),
        Path(dramatiq_prometheus.__file__),
    ]
    literal = re.compile(r"""["']((?:crawlsched|dramatiq)_[a-z0-9_]+)["']""")
    return frozenset(name for path in sources for name in literal.findall(path.read_text()))


def undefined_metrics(queries: list[tuple[str, str]]) -> dict[str, list[str]]:
    defined = defined_metric_names()
    missing: dict[str, list[str]] = {}
    for where, expr in queries:
        for name in METRIC_NAME.findall(expr):
            base = re.sub(r"_(bucket|sum|count|created)$", "", name)
            if name not in defined and base not in defined:
                missing.setdefault(name, []).append(where)
    return missing


def copied_queries() -> list[tuple[str, str]]:
    dashboards = sorted((OBSERVABILITY / "dashboards").glob("*.json"))
    return [
        *dashboard_queries(dashboards),
        *rule_expressions(OBSERVABILITY / "prometheus-rule.yaml"),
    ]


def test_every_metric_the_copies_use_is_one_the_code_defines():
    queries = copied_queries()
    assert len({n for _, e in queries for n in METRIC_NAME.findall(e)}) > 20
    assert undefined_metrics(queries) == {}


def test_metric_check_rejects_a_name_the_code_does_not_define():
    queries = [*copied_queries(), ("made up", "rate(crawlsched_pages_teleported_total[5m])")]
    assert undefined_metrics(queries) == {"crawlsched_pages_teleported_total": ["made up"]}


def test_the_scrape_jobs_are_the_ones_the_dashboards_and_alerts_name(rendered):
    jobs = {
        relabel["replacement"]
        for r in rendered["small"]
        if r["kind"] == "PodMonitor"
        for endpoint in r["spec"]["podMetricsEndpoints"]
        for relabel in endpoint.get("relabelings", [])
        if relabel.get("targetLabel") == "job"
    }
    named = {job for _, e in copied_queries() for job in re.findall(r'job="([^"]+)"', e)}
    assert named and named <= jobs

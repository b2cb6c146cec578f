"""docker-compose.yml in production shape, checked offline: every service healthchecked, memory
limited, its logs rotated and its image pinned; every CRAWLSCHED_* variable a setting; MongoDB a
replica set with auth whose URL agrees with the server; Prometheus scraping what compose runs
and sending alerts to its Alertmanager, whose config amtool accepts. Each check is shown to
reject a broken input."""

from __future__ import annotations

import copy
import os
import re
import shutil
import subprocess
import tomllib
from importlib import metadata
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version
from pydantic import AliasChoices, AliasPath

from crawlsched.settings import Settings
from tests.support.deploy import COMPOSE_ENV, COMPOSE_FILE, REPO, compose_config
from tests.support.prometheus import promtool
from tests.support.services import service_unavailable
from tests.support.waiting import wait_for

ALERTMANAGER_DIR = REPO / "alertmanager"
RENDER = ALERTMANAGER_DIR / "render-config.sh"
OWN_IMAGE = "crawlsched"
# An exact version (1.2.3, v1.2.3, 4.27.0-20241204) or a digest: never `latest`, never `7`.
PINNED_TAG = re.compile(r"v?\d+\.\d+\.\d+([.-][A-Za-z0-9.]+)?")


@pytest.fixture(scope="module")
def config() -> dict:
    if shutil.which("docker-compose") is None:
        service_unavailable("docker-compose is not installed (Debian package docker-compose)")
    result = compose_config()
    assert result.returncode == 0, result.stderr
    return yaml.safe_load(result.stdout)


@pytest.fixture(scope="module")
def raw() -> dict:
    return yaml.safe_load(COMPOSE_FILE.read_text())


# ---- every service: healthcheck, memory, logs, image -------------------------------------


def one_shots(services: dict) -> set[str]:
    """Services that run once (restart "no") and that others wait for to exit 0: a
    healthcheck means nothing for them."""
    awaited = {
        name
        for service in services.values()
        for name, how in (service.get("depends_on") or {}).items()
        if isinstance(how, dict) and how.get("condition") == "service_completed_successfully"
    }
    return {n for n in awaited if str(services[n].get("restart", "no")) == "no"}


def memory_limit(service: dict) -> str | None:
    limits = service.get("deploy", {}).get("resources", {}).get("limits", {})
    return service.get("mem_limit") or limits.get("memory")


def service_problems(services: dict) -> list[str]:
    problems = []
    exempt = one_shots(services)
    for name, service in sorted(services.items()):
        check = service.get("healthcheck") or {}
        if name not in exempt and (not check.get("test") or check.get("disable")):
            problems.append(f"{name}: no healthcheck")
        if not memory_limit(service):
            problems.append(f"{name}: no memory limit")
        logging = service.get("logging") or {}
        options = logging.get("options") or {}
        if logging.get("driver") != "json-file" or not {"max-size", "max-file"} <= set(options):
            problems.append(f"{name}: logs not rotated (json-file with max-size and max-file)")
    return problems


def image_problems(raw_services: dict) -> list[str]:
    """Images as written (before substitution): crawlsched's own takes its tag from the
    environment; every other is an exact version or a digest."""
    problems = []
    for name, service in sorted(raw_services.items()):
        image = str(service.get("image", ""))
        if image.partition(":")[0] == OWN_IMAGE:
            if not image.startswith(f"{OWN_IMAGE}:${{CRAWLSCHED_IMAGE_TAG:-"):
                problems.append(f"{name}: {image}: crawlsched's tag comes from the environment")
            continue
        tag = image.rpartition("/")[2].partition(":")[2]
        if "@sha256:" not in image and not PINNED_TAG.fullmatch(tag):
            problems.append(f"{name}: {image!r} is not pinned to an exact version")
    return problems


def test_every_service_is_healthchecked_memory_limited_and_rotates_its_logs(config):
    services = config["services"]
    assert len(services) >= 14
    assert one_shots(services) == {"init-db"}
    assert service_problems(services) == []


def test_service_check_rejects_a_missing_healthcheck_limit_or_rotation(config):
    broken = copy.deepcopy(config["services"])
    del broken["grafana"]["healthcheck"]
    broken["worker"].pop("mem_limit", None)
    broken["worker"].pop("deploy", None)
    broken["alertmanager"]["logging"]["options"].pop("max-file")
    broken["init-db"]["restart"] = "unless-stopped"  # no longer a one-shot
    broken["rabbitmq"]["healthcheck"] = {"disable": True}
    assert service_problems(broken) == [
        "alertmanager: logs not rotated (json-file with max-size and max-file)",
        "grafana: no healthcheck",
        "init-db: no healthcheck",
        "rabbitmq: no healthcheck",
        "worker: no memory limit",
    ]


def test_every_image_is_pinned(raw, config):
    assert image_problems(raw["services"]) == []
    # Substituted, crawlsched's own image defaults to `latest`, or takes the tag given.
    assert config["services"]["worker"]["image"] == "crawlsched:latest"
    tagged = compose_config({**COMPOSE_ENV, "CRAWLSCHED_IMAGE_TAG": "2024.11.1"})
    assert "image: crawlsched:2024.11.1" in tagged.stdout


def test_image_check_rejects_floating_tags():
    services = {
        "a": {"image": "mongo:7"},
        "b": {"image": "prom/prometheus:latest"},
        "c": {"image": "grafana/grafana"},
        "d": {"image": "crawlsched:latest"},
        "ok1": {"image": "mongo:7.0.14"},
        "ok2": {"image": "selenium/hub:4.27.0-20241204"},
        "ok3": {"image": "busybox@sha256:" + "0" * 64},
        "ok4": {"image": "crawlsched:${CRAWLSCHED_IMAGE_TAG:-latest}"},
    }
    assert [p.split(":")[0] for p in image_problems(services)] == ["a", "b", "c", "d"]


# ---- CRAWLSCHED_* variables are settings -------------------------------------------------


def settings_variables() -> set[str]:
    """The environment variables Settings reads: CRAWLSCHED_<FIELD>, or a field's aliases."""
    names = set()
    for field_name, field in Settings.model_fields.items():
        aliases = [field.alias, field.validation_alias]
        found = []
        for alias in aliases:
            if isinstance(alias, str):
                found.append(alias)
            elif isinstance(alias, AliasChoices):
                found += [c for c in alias.choices if isinstance(c, str)]
            elif isinstance(alias, AliasPath) and isinstance(alias.path[0], str):
                found.append(alias.path[0])
        names |= {a.upper() for a in found} or {f"CRAWLSCHED_{field_name.upper()}"}
    return names


def unknown_variables(services: dict) -> dict[str, list[str]]:
    known = settings_variables()
    unknown: dict[str, list[str]] = {}
    for name, service in sorted(services.items()):
        for variable in sorted(service.get("environment") or {}):
            if variable.startswith("CRAWLSCHED_") and variable not in known:
                unknown.setdefault(variable, []).append(name)
    return unknown


def test_every_crawlsched_variable_compose_sets_is_a_setting(config):
    services = config["services"]
    used = {v for s in services.values() for v in s.get("environment") or {}}
    assert {"CRAWLSCHED_MONGO_URL", "CRAWLSCHED_API_METRICS_ADDRESS"} <= used
    assert unknown_variables(services) == {}


def test_variable_check_rejects_a_misspelt_setting(config):
    broken = copy.deepcopy(config["services"])
    broken["clock"]["environment"]["CRAWLSCHED_CLOCK_INTERVAL"] = "1"  # the field is _s
    assert unknown_variables(broken) == {"CRAWLSCHED_CLOCK_INTERVAL": ["clock"]}
    assert "CRAWLSCHED_CLOCK_INTERVAL_S" in settings_variables()


# ---- workers drain before they are killed; heartbeat probes ------------------------------


def seconds(duration: str) -> float:
    """A compose duration (`1m30s`, `60s`, `500ms`) in seconds."""
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|us|h|m|s)", str(duration))
    if not parts or "".join(n + u for n, u in parts) != str(duration):
        raise ValueError(f"not a duration: {duration!r}")
    unit = {"h": 3600, "m": 60, "s": 1, "ms": 1e-3, "us": 1e-6}
    return sum(float(n) * unit[u] for n, u in parts)


def test_workers_drain_within_their_stop_grace_period(config):
    worker = config["services"]["worker"]
    drain = float(worker["environment"]["CRAWLSCHED_DRAIN_S"])
    grace = seconds(worker["stop_grace_period"])
    # Time to finish the page in flight and give the rest back, then to exit, before SIGKILL.
    assert 0 < drain <= grace - 10, (drain, grace)
    assert seconds("1m30s") == 90 and seconds("500ms") == 0.5
    with pytest.raises(ValueError):
        seconds("60")


def test_workers_and_clocks_are_probed_on_their_heartbeat(config):
    for name in ("worker", "clock"):
        service = config["services"][name]
        assert service["healthcheck"]["test"] == [
            "CMD",
            "python",
            "-m",
            "crawlsched.probe",
            "live",
        ], name
        assert service["environment"]["CRAWLSCHED_WORKER_HEARTBEAT_FILE"].startswith("/tmp/")


# ---- MongoDB: replica set, auth, backups -------------------------------------------------


def mongo_problems(services: dict) -> list[str]:
    """Does the crawlsched URL name the replica set mongod runs, with the root user's
    credentials, and does the healthcheck initiate that same set?"""
    problems = []
    mongo = services["mongo"]
    command = mongo["command"]
    repl_set = command[command.index("--replSet") + 1] if "--replSet" in command else None
    if "--keyFile" not in command:
        problems.append("mongod: no --keyFile (auth with a replica set needs one)")
    health = " ".join(mongo["healthcheck"]["test"])
    if f"_id: '{repl_set}'" not in health:
        problems.append(f"healthcheck does not initiate replica set {repl_set!r}")
    user = mongo["environment"].get("MONGO_INITDB_ROOT_USERNAME")
    password = mongo["environment"].get("MONGO_INITDB_ROOT_PASSWORD")
    for name, service in sorted(services.items()):
        env = service.get("environment") or {}
        url = env.get("CRAWLSCHED_MONGO_URL") or env.get("MONGO_URL") or env.get("MONGODB_URI")
        if url is None:
            continue
        parts = urlsplit(url)
        query = parse_qs(parts.query)
        if query.get("replicaSet") != [repl_set]:
            problems.append(f"{name}: replicaSet={query.get('replicaSet')} not {repl_set!r}")
        if (parts.username, parts.password) != (user, password) or not password:
            problems.append(f"{name}: not the root user's credentials")
        if query.get("authSource") != ["admin"]:
            problems.append(f"{name}: authSource is not admin")
    return problems


def test_mongodb_is_a_replica_set_with_auth_that_every_client_names(config):
    services = config["services"]
    assert mongo_problems(services) == []
    clients = [n for n, s in services.items() if "mongo" in str(s.get("environment"))]
    assert {"worker", "clock", "api", "init-db", "mongo-backup", "mongodb-exporter"} <= set(clients)
    keyfile = services["mongo"]["command"][services["mongo"]["command"].index("--keyFile") + 1]
    entrypoint = (REPO / "mongo" / "keyfile-entrypoint.sh").read_text()
    assert f"MONGO_KEYFILE:-{keyfile}" in entrypoint
    # the key lives in a volume: the same key after the container is made again
    assert any("/data/configdb" in str(v) for v in services["mongo"]["volumes"])


def test_mongo_check_rejects_a_url_without_the_replica_set_or_credentials(config):
    broken = copy.deepcopy(config["services"])
    broken["api"]["environment"]["CRAWLSCHED_MONGO_URL"] = "mongodb://mongo:27017/"
    broken["mongo"]["command"] = ["mongod", "--replSet", "rs1", "--bind_ip_all"]
    problems = mongo_problems(broken)
    assert "mongod: no --keyFile (auth with a replica set needs one)" in problems
    assert "healthcheck does not initiate replica set 'rs1'" in problems
    assert "api: not the root user's credentials" in problems
    assert "api: authSource is not admin" in problems
    assert sum("replicaSet=" in p for p in problems) == len(
        [s for s in broken.values() if "mongodb://" in str(s.get("environment"))]
    )


def _run(script: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(script), *args], capture_output=True, text=True, env=env, timeout=30, check=False
    )


def test_mongo_keyfile_is_made_once_for_mongod_only(tmp_path):
    # Given a stand-in for the image's own entrypoint, which prints what it was handed
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "docker-entrypoint.sh").write_text('#!/bin/sh\necho "handed: $*"\n')
    (bin_dir / "docker-entrypoint.sh").chmod(0o755)
    keyfile = tmp_path / "keyfile"
    owner = f"{Path('/proc/self').stat().st_uid}"
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "MONGO_KEYFILE": str(keyfile)}
    env["MONGO_KEYFILE_OWNER"] = owner
    script = REPO / "mongo" / "keyfile-entrypoint.sh"
    # When it starts twice
    first = _run(script, "mongod", "--replSet", "rs0", env=env)
    key = keyfile.read_text()
    second = _run(script, "mongod", "--replSet", "rs0", env=env)
    # Then the key was made once, is base64 of 756 bytes, readable by its owner only
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    assert first.stdout.strip() == "handed: mongod --replSet rs0"
    assert keyfile.read_text() == key and len(key) == 1008
    assert re.fullmatch(r"[A-Za-z0-9+/=]+", key)
    assert keyfile.stat().st_mode & 0o777 == 0o400


def test_backup_writes_whole_archives_and_removes_old_ones(tmp_path):
    # Given a stand-in mongodump that writes its archive (the real one needs a server)
    bin_dir, backups = tmp_path / "bin", tmp_path / "backups"
    bin_dir.mkdir()
    backups.mkdir()
    (bin_dir / "mongodump").write_text(
        '#!/bin/sh\nfor a; do case "$a" in --archive=*) echo dump > "${a#--archive=}";; '
        'esac; done\necho "$*" >> "$(dirname "$0")/calls"\n'
    )
    (bin_dir / "mongodump").chmod(0o755)
    old = backups / "crawlsched-20200101T000000Z.archive.gz"
    old.write_text("old")
    os.utime(old, (1_577_836_800, 1_577_836_800))
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "MONGO_URL": "mongodb://u:p@mongo/?replicaSet=rs0",
        "BACKUP_DIR": str(backups),
        "BACKUP_INTERVAL_S": "3600",
        "BACKUP_KEEP_DAYS": "14",
    }
    script = REPO / "mongo" / "backup.sh"
    assert _run(script, "check", env=env).returncode == 1  # only an old archive: unhealthy
    # When the loop runs its first round
    loop = subprocess.Popen([str(script)], env=env, stdout=subprocess.PIPE, text=True)
    try:
        line = loop.stdout.readline()
        wait_for(lambda: not old.exists(), 10, "the old archive to be removed")
    finally:
        loop.terminate()
        loop.wait(timeout=10)
    # Then one whole archive is there, the old one is gone, and the healthcheck passes
    archives = sorted(p.name for p in backups.iterdir())
    assert line.startswith("backup_written ") and len(archives) == 1, archives
    assert re.fullmatch(r"crawlsched-\d{8}T\d{6}Z\.archive\.gz", archives[0])
    calls = (bin_dir / "calls").read_text()
    assert "--uri=mongodb://u:p@mongo/?replicaSet=rs0 --oplog --gzip --archive=" in calls
    assert _run(script, "check", env=env).returncode == 0


# ---- Prometheus: scrape jobs, alerting -----------------------------------------------------


def prometheus_config() -> dict:
    return yaml.safe_load((REPO / "prometheus" / "prometheus.yml").read_text())


def scrape_problems(prometheus: dict, services: dict) -> list[str]:
    """Every static target and discovered name is a compose service listening on that port."""
    problems = []
    ports = {
        "api": services["api"]["environment"]["CRAWLSCHED_API_METRICS_ADDRESS"],
        "rabbitmq": "rabbitmq:15692",  # rabbitmq_prometheus, enabled in the official image
        "mongodb-exporter": next(
            a for a in services["mongodb-exporter"]["command"] if "listen-address" in a
        ),
        "alertmanager": "alertmanager:9093",
    }
    ports = {name: int(str(v).rpartition(":")[2]) for name, v in ports.items()}
    for job in prometheus["scrape_configs"]:
        for static in job.get("static_configs", []):
            for target in static["targets"]:
                host, _, port = target.rpartition(":")
                if host == "localhost":
                    continue
                if host not in services:
                    problems.append(f"{job['job_name']}: {host} is no compose service")
                elif host in ports and ports[host] != int(port):
                    problems.append(f"{job['job_name']}: {host} exports on {ports[host]}")
        for dns in job.get("dns_sd_configs", []):
            problems += [
                f"{job['job_name']}: {n} is no compose service"
                for n in dns["names"]
                if n not in services
            ]
    jobs = {job["job_name"] for job in prometheus["scrape_configs"]}
    for needed in (
        "crawlsched-workers",
        "crawlsched-clock",
        "crawlsched-api",
        "rabbitmq",
        "mongodb",
    ):
        if needed not in jobs:
            problems.append(f"no scrape job {needed}")
    managers = [
        t
        for m in prometheus.get("alerting", {}).get("alertmanagers", [])
        for s in m.get("static_configs", [])
        for t in s["targets"]
    ]
    if managers != ["alertmanager:9093"]:
        problems.append(f"alerts are sent to {managers}, not the compose Alertmanager")
    return problems


def test_prometheus_scrapes_api_rabbitmq_mongodb_and_alerts_alertmanager(config):
    assert scrape_problems(prometheus_config(), config["services"]) == []


def test_scrape_check_rejects_a_wrong_port_a_missing_job_or_no_alerting(config):
    broken = prometheus_config()
    del broken["alerting"]
    broken["scrape_configs"] = [j for j in broken["scrape_configs"] if j["job_name"] != "mongodb"]
    for job in broken["scrape_configs"]:
        if job["job_name"] == "rabbitmq":
            job["static_configs"][0]["targets"] = ["rabbitmq:15672"]
    assert scrape_problems(broken, config["services"]) == [
        "rabbitmq: rabbitmq exports on 15692",
        "no scrape job mongodb",
        "alerts are sent to [], not the compose Alertmanager",
    ]


def _need(binary: str, package: str) -> None:
    if shutil.which(binary) is None:
        service_unavailable(f"{binary} is not installed (Debian package {package})")


def test_promtool_accepts_the_config_and_rejects_a_broken_alerting_section(tmp_path):
    _need("promtool", "prometheus")
    good = promtool("check", "config", str(REPO / "prometheus" / "prometheus.yml"))
    assert good.returncode == 0, good.stdout + good.stderr
    broken = prometheus_config()
    broken["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"] = ["http://x:y"]
    shutil.copy(REPO / "prometheus" / "alerts.yml", tmp_path / "alerts.yml")
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(broken))
    bad = promtool("check", "config", str(tmp_path / "prometheus.yml"))
    assert bad.returncode != 0


# ---- Alertmanager: the webhook URL from the environment, amtool ---------------------------


def render(url: str | None, source: Path = ALERTMANAGER_DIR / "alertmanager.yml"):
    env = {"PATH": "/usr/bin:/bin"} | ({"ALERT_WEBHOOK_URL": url} if url is not None else {})
    return _run(RENDER, str(source), env=env)


def test_alertmanager_config_takes_the_webhook_url_from_the_environment_verbatim():
    url = "https://hooks.example/services/T0/B1?token=a&b=c|d\\e'f"
    rendered = render(url)
    assert rendered.returncode == 0, rendered.stderr
    receivers = yaml.safe_load(rendered.stdout)["receivers"]
    assert receivers == [
        {"name": "webhook", "webhook_configs": [{"url": url, "send_resolved": True}]}
    ]


def test_alertmanager_config_is_refused_without_a_url_or_a_placeholder(tmp_path):
    missing = render(None)
    assert missing.returncode != 0 and "ALERT_WEBHOOK_URL" in missing.stderr
    edited = tmp_path / "alertmanager.yml"
    source = (ALERTMANAGER_DIR / "alertmanager.yml").read_text()
    edited.write_text(source.replace("alert-webhook-url.invalid", "x"))
    no_placeholder = render("http://h/", edited)
    assert no_placeholder.returncode != 0 and "no placeholder" in no_placeholder.stderr


def test_compose_alertmanager_renders_its_config_before_it_starts(config):
    alertmanager = config["services"]["alertmanager"]
    assert alertmanager["environment"]["ALERT_WEBHOOK_URL"] == COMPOSE_ENV["ALERT_WEBHOOK_URL"]
    script = " ".join(alertmanager["command"])
    mount = next(v for v in alertmanager["volumes"] if "alertmanager-crawlsched" in str(v))
    target = mount["target"] if isinstance(mount, dict) else mount.split(":")[1]
    assert f"sh {target}/render-config.sh {target}/alertmanager.yml > " in script
    assert "&& exec /bin/alertmanager --config.file=" in script
    without = compose_config({k: v for k, v in COMPOSE_ENV.items() if k != "ALERT_WEBHOOK_URL"})
    assert without.returncode != 0 and "ALERT_WEBHOOK_URL" in without.stderr


def test_amtool_accepts_the_rendered_config_and_rejects_a_broken_one(tmp_path):
    _need("amtool", "prometheus-alertmanager")
    rendered = render("https://hooks.example/alerts?a=1&b=2")
    (tmp_path / "good.yml").write_text(rendered.stdout)
    good = subprocess.run(
        ["amtool", "check-config", str(tmp_path / "good.yml")],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert good.returncode == 0, good.stdout + good.stderr
    # A route to a receiver nobody defined
    broken = yaml.safe_load(rendered.stdout)
    broken["route"]["routes"][0]["receiver"] = "pager"
    (tmp_path / "bad.yml").write_text(yaml.safe_dump(broken))
    bad = subprocess.run(
        ["amtool", "check-config", str(tmp_path / "bad.yml")],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert bad.returncode != 0 and "pager" in bad.stdout + bad.stderr


# ---- the image installs what requirements.lock pins ---------------------------------------


def lock_pins(lock_text: str) -> dict[str, tuple[Version, bool]]:
    """name → (version, has hashes) of every `name==version` entry of a pip lock file."""
    pins = {}
    for block in re.split(r"\n(?=[A-Za-z0-9])", lock_text):
        found = re.match(r"([A-Za-z0-9._-]+)==([^\s\\;]+)", block)
        if found:
            pins[canonicalize_name(found.group(1))] = (
                Version(found.group(2)),
                "--hash=sha256:" in block,
            )
    return pins


def with_extras(dependencies: list[str]) -> list[Requirement]:
    """The requirements, and what each one's extras add (read from the installed package)."""
    requirements = [Requirement(line) for line in dependencies]
    for requirement in list(requirements):
        for extra in requirement.extras:
            for line in metadata.requires(requirement.name) or []:
                added = Requirement(line)
                if added.marker and added.marker.evaluate({"extra": extra}):
                    added.marker = None
                    requirements.append(added)
    return requirements


def lock_problems(lock_text: str, dependencies: list[str]) -> list[str]:
    """Each runtime dependency of pyproject.toml (extras included) pinned in the lock at a
    version its specifier allows, and every pin with its hashes."""
    pins = lock_pins(lock_text)
    problems = [f"{name}: no hash" for name, (_, hashed) in sorted(pins.items()) if not hashed]
    for requirement in with_extras(dependencies):
        name = canonicalize_name(requirement.name)
        if name not in pins:
            problems.append(f"{requirement}: not in the lock")
        elif pins[name][0] not in requirement.specifier:
            problems.append(f"{requirement}: locked at {pins[name][0]}")
    return problems


def runtime_dependencies() -> list[str]:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]


def test_the_lock_pins_every_runtime_dependency_with_hashes():
    lock = (REPO / "requirements.lock").read_text()
    assert lock_problems(lock, runtime_dependencies()) == []
    assert "pika" in {r.name for r in with_extras(["dramatiq[rabbitmq]"])}
    assert len(lock_pins(lock)) > len(runtime_dependencies())


def test_lock_check_rejects_a_missing_an_unhashed_or_an_outdated_pin():
    lock = (REPO / "requirements.lock").read_text()
    broken = re.sub(r"(?m)^pika==.*(\n    .*)*\n", "", lock)  # pika, only wanted by an extra
    broken = re.sub(r"(?m)^(pymongo==)[^ ]+", r"\g<1>4.9.0", broken)
    broken = re.sub(r"(?m)^(typer==[^ ]+) \\\n(    --hash=.*\n)+", r"\g<1>\n", broken)
    assert lock_problems(broken, runtime_dependencies()) == [
        "typer: no hash",
        "pika<2,>=1.3: not in the lock",
        "pymongo<4.9,>=4.6: locked at 4.9.0",
        "pika<2.0,>=1.0: not in the lock",
    ]


def test_the_image_installs_the_lock_and_nothing_resolved_anew():
    dockerfile = (REPO / "Dockerfile").read_text()
    runs = [line.split("&&")[0].strip() for line in dockerfile.splitlines() if "pip " in line]
    assert runs == [
        "RUN pip install --no-cache-dir --require-hashes -r requirements.lock",
        "RUN pip install --no-cache-dir --no-deps .",
    ]
    base = re.search(r"(?m)^FROM (\S+)", dockerfile).group(1)
    assert PINNED_TAG.search(base.partition(":")[2]), base

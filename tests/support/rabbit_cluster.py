"""A three-node RabbitMQ cluster on this machine, for one test: started, joined, killed, removed.

Each node is the machine's own RabbitMQ installation started again with its own node name,
AMQP port, distribution port, configuration, data and log folders (RABBITMQ_NODENAME,
RABBITMQ_NODE_PORT, RABBITMQ_DIST_PORT, RABBITMQ_CONFIG_FILE, RABBITMQ_MNESIA_BASE,
RABBITMQ_LOG_BASE) and no plugins, so it collides with nothing the machine runs. Debian's
`rabbitmq-server` runs as the `rabbitmq` user: the folders belong to it, and the nodes share its
Erlang cookie, which is what lets them (and `rabbitmqctl`) talk to each other.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import random
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from tests.support.ports import ephemeral_start

RABBITMQ_SERVER = Path("/usr/lib/rabbitmq/bin/rabbitmq-server")
RABBITMQ_HOME = "/var/lib/rabbitmq"  # its .erlang.cookie is the one the nodes share
LOWEST_PAIRED = 10_000  # AMQP ports from here; their distribution ports 20,000 above


def cluster_unavailable() -> str | None:
    """Why this machine cannot start a cluster here, or None."""
    if not RABBITMQ_SERVER.exists() or shutil.which("rabbitmqctl") is None:
        return "RabbitMQ's server is not installed"
    if os.geteuid() != 0:
        return "starting RabbitMQ nodes as the rabbitmq user needs root"
    try:
        pwd.getpwnam("rabbitmq")
    except KeyError:
        return "no rabbitmq user"
    return None


def _free_port_pair() -> int:
    """An AMQP port whose distribution port (port + 20000) is free too, both below the
    kernel's ephemeral range: a port found free there may be any outgoing connection's source
    port before the node binds it (`tests/support/ports.py`)."""
    highest = ephemeral_start() - 1 - 20_000
    for _ in range(200):
        port = random.randint(LOWEST_PAIRED, highest)
        if all(_free(p) for p in (port, port + 20000)):
            return port
    raise RuntimeError("no free pair of ports for a RabbitMQ node")


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


@dataclass
class Node:
    name: str  # e.g. csa1b2c3-1@localhost
    port: int
    base: Path

    @property
    def url(self) -> str:
        return f"amqp://guest:guest@127.0.0.1:{self.port}/%2F"

    def pid(self) -> int | None:
        try:
            return int((self.base / "pid").read_text().strip())
        except (OSError, ValueError):
            return None


class RabbitCluster:
    def __init__(self, size: int = 3) -> None:
        tag = uuid.uuid4().hex[:6]
        # Not under the session's scratch folder: that is root's alone (0700), and the nodes run
        # as the rabbitmq user. `remove` deletes it.
        self.root = Path(tempfile.mkdtemp(prefix="crawlsched-rabbit-cluster-"))
        self.nodes = [
            Node(f"cs{tag}-{n}@localhost", _free_port_pair(), self.root / f"node{n}")
            for n in range(1, size + 1)
        ]

    @property
    def url(self) -> str:
        """Every node's URL, tried in order: what CRAWLSCHED_BROKER_URL holds for a cluster."""
        return ";".join(node.url for node in self.nodes)

    # -- life -------------------------------------------------------------------------------

    def start(self) -> RabbitCluster:
        for node in self.nodes:
            self._launch(node)
        for node in self.nodes:
            self._await_startup(node)
        first = self.nodes[0]
        for node in self.nodes[1:]:
            self.ctl(node, "stop_app")
            self.ctl(node, "join_cluster", first.name)
            self.ctl(node, "start_app")
        return self

    def _launch(self, node: Node) -> None:
        node.base.mkdir(parents=True, exist_ok=True)
        (node.base / "rabbitmq.conf").write_text(
            f"listeners.tcp.local = 127.0.0.1:{node.port}\nloopback_users = none\n"
        )
        (node.base / "enabled_plugins").write_text("[].\n")
        _give_to_rabbitmq(self.root)
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": RABBITMQ_HOME,
            "RABBITMQ_NODENAME": node.name,
            "RABBITMQ_NODE_PORT": str(node.port),
            "RABBITMQ_DIST_PORT": str(node.port + 20000),
            "RABBITMQ_CONFIG_FILE": str(node.base / "rabbitmq.conf"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(node.base / "enabled_plugins"),
            "RABBITMQ_MNESIA_BASE": str(node.base / "mnesia"),
            "RABBITMQ_LOG_BASE": str(node.base / "log"),
            "RABBITMQ_PID_FILE": str(node.base / "pid"),
        }
        subprocess.run(
            ["runuser", "-u", "rabbitmq", "--", str(RABBITMQ_SERVER), "-detached"],
            env=env,
            check=True,
            capture_output=True,
            timeout=60,
        )

    def _await_startup(self, node: Node, within_s: float = 120) -> None:
        # `-detached` returns before the VM has registered its name: until then, await_startup
        # fails at once ("not running at all"), so ask again.
        deadline = time.monotonic() + within_s
        while True:
            try:
                self.ctl(node, "await_startup", "--timeout", "60", timeout=90)
                return
            except RuntimeError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(1)

    def stop_app(self, node: Node) -> None:
        """The RabbitMQ application stops; the Erlang VM stays (a graceful node shutdown)."""
        self.ctl(node, "stop_app")

    def sigkill(self, node: Node) -> None:
        """The node's Erlang VM dies at once, as in a crash or an OOM kill."""
        pid = node.pid()
        if pid is None:
            raise RuntimeError(f"no pid file for {node.name}")
        os.kill(pid, signal.SIGKILL)

    def restart(self, node: Node) -> None:
        """Start a node that died (or whose application was stopped) again, on its own data:
        it rejoins the cluster."""
        if (pid := node.pid()) is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 0)
                # The VM lives: after stop_app only the application needs starting (a no-op
                # on a node that runs).
                self.ctl(node, "start_app")
                self._await_startup(node)
                return
        self._launch(node)
        self._await_startup(node)

    def remove(self) -> None:
        """Stop every node (best effort, then SIGKILL), and delete their folders."""
        for node in self.nodes:
            with contextlib.suppress(subprocess.SubprocessError, OSError):
                subprocess.run(
                    ["rabbitmqctl", "-q", "-n", node.name, "stop"],
                    check=False,
                    capture_output=True,
                    timeout=60,
                )
        for node in self.nodes:
            if (pid := node.pid()) is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        time.sleep(0.5)  # the VMs let go of their files
        shutil.rmtree(self.root, ignore_errors=True)

    # -- questions ----------------------------------------------------------------------------

    def ctl(self, node: Node, *args: str, timeout: float = 90) -> str:
        done = subprocess.run(
            ["rabbitmqctl", "-q", "-n", node.name, *args],
            check=False,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if done.returncode != 0:
            raise RuntimeError(f"rabbitmqctl {' '.join(args)} on {node.name}: {done.stderr}")
        return done.stdout

    def queue_homes(self, ask: Node) -> dict[str, str]:
        """Queue name → the node that holds it (a quorum queue's leader, a classic queue's
        home), as `ask` sees it."""
        out = self.ctl(ask, "list_queues", "name", "type", "leader", "pid", "--no-table-headers")
        homes = {}
        for line in out.splitlines():
            parts = line.split("\t")
            if len(parts) < 4:
                continue
            name, kind, leader, pid = parts[:4]
            if kind == "quorum" and leader:
                homes[name] = leader
            elif match := re.match(r"<([^.]+@[^.]+)\.", pid):
                homes[name] = match.group(1)
        return homes

    def queue_depths(self, ask: Node) -> dict[str, int]:
        out = self.ctl(ask, "list_queues", "name", "messages", "--no-table-headers")
        depths = {}
        for line in out.splitlines():
            parts = line.split("\t")
            if len(parts) >= 2 and parts[1].strip().isdigit():
                depths[parts[0]] = int(parts[1])
        return depths

    def node_named(self, name: str) -> Node:
        return next(node for node in self.nodes if node.name == name)


def _give_to_rabbitmq(root: Path) -> None:
    user = pwd.getpwnam("rabbitmq")
    for path in [root, *root.rglob("*")]:
        os.chown(path, user.pw_uid, user.pw_gid)

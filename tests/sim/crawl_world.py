"""The project's real crawl core inside the world: one `Runtime` per simulated worker process
on one shared embedded store, the actors' handlers on the simulated broker, the simulated web
as every process's HTTP client, and a clock that ticks.

Each process's runtime takes its time, sleep, locks and threads from the world
(`SimEnvironment`) and makes every store command a yield point and every store write a place it
may crash (`SimCounter`). A crashed process comes back after `RESTART_S` with a fresh runtime
(nothing of the old one's memory), and the broker gives back what it held, redelivered.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from functools import cached_property
from typing import Any

import httpx

from crawlsched.actors import all_actors, handlers
from crawlsched.actors.sends import Sends
from crawlsched.drivers.targets import parse_networks
from crawlsched.runtime import Runtime
from crawlsched.settings import Settings
from tests.sim.broker import RetryPolicy, SimBroker
from tests.sim.env import SimCounter, SimEnvironment
from tests.sim.kernel import SimProcess
from tests.sim.web import SimWeb
from tests.sim.world import World

RESTART_S = 5.0  # a crashed process is back this long after (virtual seconds)
HOOKS_HOST = "hooks.sim"  # where the run's webhook is delivered


class SimPublisher:
    """The events exchange, as the relay sees it: every publish recorded by the event's id, the
    publish a yield point (a process may crash before it, and then never confirms it)."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.published: list[tuple[str, str, float]] = []  # (event id, routing key, at)

    def publish(self, key: str, body: bytes, message_id: str | None = None) -> None:
        self.world.fault_point("publish", "send")
        self.published.append((message_id or json.loads(body)["_id"], key, self.world.elapsed))


class SimRuntime(Runtime):
    """A worker process's runtime over the world: the simulated web is its network."""

    def __init__(
        self,
        settings: Settings,
        world: World,
        process: SimProcess,
        web: SimWeb,
        publisher: SimPublisher,
        transport: httpx.BaseTransport,
    ) -> None:
        super().__init__(settings, SimCounter(world, process), env=SimEnvironment(world, process))
        self._web, self._publisher, self._transport = web, publisher, transport

    @cached_property
    def http(self) -> httpx.Client:
        return httpx.Client(transport=self._transport)

    @cached_property
    def resolver(self) -> Callable[[str, int], list[str]]:
        return self._web.resolve

    @cached_property
    def allowed_networks(self) -> tuple:
        return parse_networks(list(self._web.allowed_networks))

    @cached_property
    def event_publisher(self) -> Any:
        return self._publisher


class SimCluster:
    """The worker processes, their runtimes, the broker's workers, and the clock."""

    def __init__(
        self,
        world: World,
        web: SimWeb,
        broker: SimBroker,
        settings: Settings,
        processes: int,
        threads: int,
        transport: httpx.BaseTransport,
        drains: bool = False,
    ) -> None:
        self.world, self.web, self.broker, self.settings = world, web, broker, settings
        self.transport = transport  # the web, and whatever else the processes reach
        self.threads = threads
        self.publisher = SimPublisher(world)
        self.sends = Sends(broker.send, world.now)
        self.processes = [world.process(f"worker-{n}") for n in range(processes)]
        self.runtimes: dict[str, SimRuntime] = {}
        self.policies = {a.actor_name: RetryPolicy.of_actor(a) for a in all_actors()}
        self.drains = drains  # whether processes may be drained (their loops then poll)
        self.draining: set[str] = set()
        self.drained_once = False
        self.drain_began: dict[str, float] = {}
        self.drained: list[tuple[str, float]] = []  # (process, virtual seconds its drain took)
        world.on_crash(lambda p: world.call_later(RESTART_S, lambda: self.boot(p)))

    def runtime_of(self, process: SimProcess) -> SimRuntime:
        return self.runtimes[process.name]

    def boot(self, process: SimProcess) -> None:
        """Start (or restart, after a crash) a worker process: a fresh runtime, its threads."""
        if process.crashed:
            self.world.restart(process)
        rt = SimRuntime(
            self.settings, self.world, process, self.web, self.publisher, self.transport
        )
        self.runtimes[process.name] = rt
        table = handlers.table(lambda: rt, self.sends)
        self.draining.discard(process.name)
        self.drain_began.pop(process.name, None)
        if not self.drains:
            loop = self.broker.worker(process, handlers.QUEUES, table, self.policies)
            for n in range(self.threads):
                self.world.spawn(process, loop, f"{process.name}/worker-{n}", daemon=True)
            return
        loop = self.broker.worker(process, handlers.QUEUES, table, self.policies,
                                  running=lambda: process.name not in self.draining)  # fmt: skip
        done = [0]

        def thread() -> None:
            loop()
            done[0] += 1
            if done[0] == self.threads:  # drained: the platform starts a new one
                began = self.drain_began.pop(process.name)
                self.drained.append((process.name, self.world.elapsed - began))
                self.world.call_later(RESTART_S, lambda: self.boot(process))

        for n in range(self.threads):
            self.world.spawn(process, thread, f"{process.name}/worker-{n}", daemon=True)

    def drain(self, process: SimProcess) -> None:
        """SIGTERM to a worker process: its batches drain (`env.draining()`), its worker
        threads take nothing more, and once they are done it starts again, fresh."""
        if process.crashed or process.name in self.draining:
            return
        self.draining.add(process.name)
        self.drained_once = True
        self.drain_began[process.name] = self.world.elapsed
        self.runtimes[process.name].env.drained = True

    def start(self) -> None:
        for process in self.processes:
            self.boot(process)
        clock = self.world.process("clock")
        self.world.spawn(clock, self._tick, "clock", daemon=True)

    def _tick(self) -> None:
        """The clock: a tick every interval (any number of clocks may run; one is enough). It
        stops at the first drain when `drains` is set: what a drained batch gives back must be
        crawled without a tick (dramatiq stops a whole group, clockless, when one of its
        processes dies)."""
        while not (self.drains and self.drained_once):
            self.world.sleep(self.settings.clock_interval_s)
            self.broker.send("crawlsched.ticks", "tick", ())

    def now(self) -> datetime:
        return self.world.now()

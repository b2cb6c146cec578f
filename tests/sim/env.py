"""The crawl core's environment inside the world: one `SimEnvironment` per simulated process.

`SimEnvironment` implements `crawlsched.environment.Environment` (now, monotonic, sleep, lock,
condition, executor, first_done) over the world; `SimCounter` is the store's command counter
that makes every store command a yield point and every write a place the process may crash
(`CountingDatabase(db, SimCounter(world, process), lock)`).
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from datetime import datetime

from crawlsched.store.counting import CommandCounter
from tests.sim.kernel import SimProcess
from tests.sim.sync import SimCondition, SimExecutor, SimFuture, SimLock
from tests.sim.world import World


class SimEnvironment:
    """The environment of the threads of `process`: its executors' threads belong to it."""

    def __init__(self, world: World, process: SimProcess) -> None:
        self.world, self.process = world, process
        # Beyond the protocol: a seeded stream for what the core draws (backoff jitter), so a
        # run replays from its seed.
        self.random: random.Random = world.rng(f"env:{process.name}:{process.generation}")
        # Set by a scenario that stops the process as SIGTERM would (its batches drain).
        self.drained = False

    def now(self) -> datetime:
        return self.world.now()

    def monotonic(self) -> float:
        return self.world.monotonic()

    def sleep(self, seconds: float) -> None:
        self.world.sleep(seconds)

    def lock(self) -> SimLock:
        return self.world.lock(f"{self.process.name} lock")

    def condition(self, lock: SimLock) -> SimCondition:  # type: ignore[override]
        return self.world.condition(lock, f"{self.process.name} condition")

    def executor(self, width: int, name: str) -> SimExecutor:
        return self.world.executor(width, f"{name}", self.process)

    def first_done(self, pending: Iterable[SimFuture]) -> set[SimFuture]:  # type: ignore[override]
        return self.world.first_done(pending)

    def draining(self) -> bool:
        return self.drained


class SimCounter(CommandCounter):
    """Counts store commands as `CommandCounter` does, after a `world.store_step` (a yield
    point; a crash instead of a write). `process` None: whichever simulated process runs (one
    store shared by several processes); outside the simulation (the test's setup) it only
    counts."""

    def __init__(self, world: World, process: SimProcess | None = None) -> None:
        super().__init__()
        self.world, self.process = world, process

    def on_boundary(self, method: str) -> None:
        self.world.store_step(self.process, method)
        super().on_boundary(method)

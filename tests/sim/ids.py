"""Ids drawn from the world's seed: the crawl core names dispatches, tokens and events with
`uuid.uuid4()`, and a set or a sort over ids that differ from run to run would change the
order of steps. Inside `seeded_uuids(world)`, `uuid.uuid4()` draws from the seed.

Only calls through the module attribute (`uuid.uuid4()`, as crawlsched writes them) are
covered; `from uuid import uuid4` keeps the real one. Ids the store makes (mongomock's
`ObjectId()` for a document inserted without `_id`) are not: their values differ from run to
run, their order does not.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from tests.sim.world import World


@contextmanager
def seeded_uuids(world: World) -> Iterator[None]:
    rng = world.rng("uuid")
    real = uuid.uuid4
    uuid.uuid4 = lambda: uuid.UUID(int=rng.getrandbits(128), version=4)
    try:
        yield
    finally:
        uuid.uuid4 = real

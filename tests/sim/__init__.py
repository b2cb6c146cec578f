"""A deterministic simulation of the crawl core: one seed drives the interleaving of many
simulated worker processes, a virtual clock, a message broker, a web and crashes.

- `world` (over `kernel`, the baton): processes, threads, virtual time, crash injection, `run`;
- `sync`: cooperative lock, condition, queue, futures and executor;
- `env`: `SimEnvironment` (crawlsched.environment over the world) and `SimCounter`;
- `ids`: `uuid.uuid4()` drawn from the seed;
- `broker`: queues delivered as RabbitMQ and dramatiq do (at least once, out of order);
- `web`, `web_graph`: a simulated web of several hosts behind an httpx transport;
- `invariants`: pure checks over the web's request log;
- `scenarios`, `__main__`: scenarios by name, `python -m tests.sim --seed N`.
"""

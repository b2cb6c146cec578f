"""A deterministic simulation of the crawl core: one seed drives the interleaving of many
simulated worker processes, a virtual clock, a message broker, a web and crashes.

- `world`: the scheduler, processes, threads, virtual time and crash injection;
- `sync`: cooperative lock, condition, queue, futures and executor;
- `env`: `SimEnvironment` (crawlsched.environment over the world) and `SimCounter`;
- `broker`: queues delivered as RabbitMQ and dramatiq do (at least once, out of order);
- `web`, `web_graph`: a simulated web of several hosts behind an httpx transport;
- `invariants`: pure checks over the web's request log.
"""

"""The actors. `dramatiq crawlsched.actors` starts workers for all of them.

Queues: crawlsched.ticks, crawlsched.plan, crawlsched.admit.login,
crawlsched.admit.selenium, crawlsched.admit.proxy, crawlsched.crawl.<task>, crawlsched.done,
crawlsched.notify. Use `--queues` to run, say, only crawlsched.crawl.publication on a machine.
"""

from crawlsched.brokers import ensure_broker

broker = ensure_broker()

from crawlsched.actors import (  # noqa: E402  (the broker must exist before actors are declared)
    coordinator,
    crawl,
    gatekeepers,
    notifier,
    planner,
    ticker,
)


def all_actors() -> list:
    return [
        ticker.tick,
        planner.plan_crawls,
        planner.plan_children,
        gatekeepers.admit_login,
        gatekeepers.admit_selenium,
        gatekeepers.admit_proxy,
        gatekeepers.wake_login,
        gatekeepers.wake_selenium,
        gatekeepers.wake_proxy,
        *crawl.CRAWL_ACTORS.values(),
        coordinator.record_finished,
        notifier.deliver_webhook,
    ]


__all__ = [
    "all_actors",
    "broker",
    "coordinator",
    "crawl",
    "gatekeepers",
    "notifier",
    "planner",
    "ticker",
]

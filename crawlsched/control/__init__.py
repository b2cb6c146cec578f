"""What callers ask of the system, one function per operation: from a runtime and plain
arguments to the JSON-ready answer (ISO 8601 dates, ids as strings).

The HTTP API's routes answer with these functions, and so does the command line when it works
on the store itself (`crawlsched.cli.local`); through a server the command line gets the same
answers from the routes. That is what makes a command's `--json` the API's answer, and its
table the same wherever it runs.

Operations that send messages take the senders they need (`Senders`): the API's process and
the command line each know whether their messages reach a worker.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from crawlsched.errors import CrawlschedError


class NoWorkers(CrawlschedError, ValueError):
    """A message that would reach no worker (a stub broker that ends with its process)."""


@dataclass(frozen=True)
class Senders:
    """`plan(schedule_id, fire_at_iso)` (the planner), `plan_pass(run_id, collection)` (a run's
    own pass: None leaves it to the ticker's next sweep) and `notify` (webhook deliveries;
    None: the ticker's relay sends them). `plan` None: nothing here reaches a worker."""

    plan: Callable[[str, str], Any] | None = None
    plan_pass: Callable[[str, str], Any] | None = None
    notify: Callable[..., Any] | None = None

    def planner(self) -> Callable[[str, str], Any]:
        if self.plan is None:
            raise NoWorkers(
                "starting a run sends a message to the workers, and none reads this one: use "
                "a standalone server, or set CRAWLSCHED_BROKER_URL=amqp://…"
            )
        return self.plan

"""`LocalBackend`: the command line on the store itself (MongoDB, or an embedded store), with
no server between. Each operation is answered by the very function the API's route calls
(`crawlsched.control`), so the answer is the API's, and a command renders it the same way.

Errors become what a route would answer, as one line and an exit code: bad input and unknown
names 2, anything else that failed 1 (a service that cannot be reached included).
"""

from __future__ import annotations

import importlib
import logging
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from crawlsched.cli.backend import CommandFailed, Op
from crawlsched.settings import Settings


class LocalBackend:
    """`vanishing`: the store is an embedded one that ends with this command (no server, no
    MongoDB). A change there would be lost: it is refused with `vanishing` as the reason; a
    read finds nothing, and says so once."""

    def __init__(
        self,
        settings: Settings,
        command: str = "crawlsched",
        vanishing: str | None = None,
        runtime: Any = None,
        delivers: bool | None = None,
    ) -> None:
        from crawlsched.drivers.targets import redact

        self.settings = settings
        self.command = command
        self.vanishing = vanishing
        self.where = f"the store at {redact(settings.mongo_url)}"
        self._rt = runtime
        self._delivers = delivers
        self._noted = False
        # A backend handed the runtime of a process that set its broker up (`crawl` on
        # embedded defaults) sends through it; any other sets one up before sending.
        self.broker_ready = runtime is not None

    @property
    def rt(self) -> Any:
        if self._rt is None:
            from crawlsched.logs import configure_logging
            from crawlsched.runtime import Runtime

            # The flow's log lines go to this command's stderr, never into its output. What
            # Apprise refuses, the command says in its own one line: not Apprise's log too.
            configure_logging(self.settings.log_format, self.settings.log_level)
            for handler in logging.getLogger().handlers:  # (the handler this command set up)
                handler.addFilter(_not_apprise)
            self._rt = Runtime(self.settings)
        return self._rt

    # -- the protocol ----------------------------------------------------------------------

    def call(self, op: Op, **args: Any) -> Any:
        answer = self._answer(op)
        if op.sends:
            args["senders"] = self.senders()
        with self._translated():
            return answer(self.rt, **args)

    def items(self, op: Op, limit: int, **args: Any) -> list[dict[str, Any]]:
        args.setdefault("offset", 0)
        return self.call(op, **args, limit=limit)["items"]

    def upload(self, op: Op, chunks: Iterable[bytes], **args: Any) -> Iterator[dict[str, Any]]:
        answer = self._answer(op)
        with self._translated():
            lines = answer(self.rt, chunks=chunks, **args)
            yield from lines

    def download(self, op: Op, **args: Any) -> Iterator[bytes]:
        answer = self._answer(op)
        with self._translated():
            yield from answer(self.rt, **args)

    # -- what the API's process knows by itself --------------------------------------------

    def delivers(self) -> bool:
        """Whether a message sent from here reaches a worker (a stub broker started by a
        command lives and dies with it)."""
        if self._delivers is not None:
            return self._delivers
        return not self.settings.broker_url.startswith("stub://")

    def senders(self) -> Any:
        """The actors' senders when messages reach a worker; otherwise what the ticker's next
        sweep does anyway (a run's pass) is left to it, and starting a run is refused."""
        from crawlsched.control import Senders

        if not self.broker_ready:
            from crawlsched.brokers import setup_broker

            setup_broker(self.settings)  # also points the flow's log lines at stderr
            self.broker_ready = True
        from crawlsched.actors.sends import send_plan_children, send_plan_iso, send_webhook

        if not self.delivers():
            return Senders(notify=send_webhook)
        return Senders(send_plan_iso, send_plan_children, send_webhook)

    # -- helpers ---------------------------------------------------------------------------

    def _answer(self, op: Op) -> Callable[..., Any]:
        if self.vanishing is not None and op.store:
            if op.changes:
                raise CommandFailed(
                    f"`{self.command}` would change a store that vanishes when it ends "
                    f"({self.vanishing}): start `crawlsched standalone` to keep data in "
                    f"{self.settings.data_dir}, or set CRAWLSCHED_MONGO_URL=mongodb://…",
                    1,
                )
            if not self._noted:
                self._noted = True
                print(f"note: the store is empty: {self.vanishing}", file=sys.stderr)
        module, _, name = op.answer.partition(":")
        return getattr(importlib.import_module(f"crawlsched.control.{module}"), name)

    def _translated(self) -> Any:
        return translated(self.settings)


def _not_apprise(record: logging.LogRecord) -> bool:
    return not record.name.startswith("apprise")


@contextmanager
def translated(settings: Settings) -> Iterator[None]:
    """Errors of the store and the flow as a route would answer them: one line, exit 2 for bad
    input and unknown names, 1 for anything else that failed; a bug keeps its traceback."""
    try:
        yield
    except CommandFailed:
        raise
    except Exception as e:
        failed = failure_of(settings, e)
        if failed is None:
            raise
        raise failed from None


def failure_of(settings: Settings, error: BaseException) -> CommandFailed | None:
    import pymongo.errors

    from crawlsched.errors import CrawlschedError, ServiceUnreachable, UnsafeTarget
    from crawlsched.services import mongo_unreachable

    if isinstance(error, ServiceUnreachable):
        return CommandFailed(str(error), 1)
    if isinstance(error, pymongo.errors.ConnectionFailure):
        return CommandFailed(str(mongo_unreachable(settings, error)), 1)
    if isinstance(error, KeyError | IndexError | UnicodeError):
        return None  # a bug, not a refusal: its traceback says where
    if isinstance(error, UnsafeTarget | ValueError | LookupError):
        return CommandFailed(str(error), 2)
    if isinstance(error, CrawlschedError):
        return CommandFailed(str(error), 1)
    return None

"""What every command shares: settings from the environment, a runtime, errors as exit codes."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import pymongo.errors
import typer
from rich.console import Console, ConsoleDimensions
from rich.table import Table
from rich.text import Text

from crawlsched.encoding import plain
from crawlsched.errors import CrawlschedError, WriteOutcomeUnknown
from crawlsched.invocation import LOCAL, Invocation
from crawlsched.runtime import Runtime
from crawlsched.services import services_or_exit
from crawlsched.settings import Settings, load_settings_or_exit

# Piped or captured (a file, a pager, the API's command line): this many columns at most.
PIPED_COLUMNS = 80


class DataConsole(Console):
    """A console that prints data as it is: no rich markup (`[red]`) and no emoji codes
    (`:child:`) read out of ids, URLs or messages; style a deliberate part with `Text`.

    On a terminal it takes the terminal's width. Piped, it takes `COLUMNS` if set, else
    `PIPED_COLUMNS` (rich would otherwise take the size of any standard stream that is a
    terminal, stdin included). A table's cells are never cut short: a column too narrow for
    a value folds it onto the next lines instead of ending it in an ellipsis."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(markup=False, emoji=False, **kwargs)

    def print(self, *objects: Any, **kwargs: Any) -> None:
        for table in objects:
            if isinstance(table, Table):
                for column in table.columns:
                    if column.overflow == "ellipsis":
                        column.overflow = "fold"
        super().print(*objects, **kwargs)

    @property
    def size(self) -> ConsoleDimensions:
        size = super().size
        if self.is_terminal:
            return size
        columns = os.environ.get("COLUMNS", "")
        width = int(columns) if columns.isdigit() and int(columns) > 0 else PIPED_COLUMNS
        return ConsoleDimensions(width, size.height)


console = DataConsole()
err_console = DataConsole(stderr=True)


@dataclass(frozen=True)
class Host:
    """A server running commands in its own process (`crawlsched standalone`, `api serve`):
    they use its runtime, and its broker when `delivers` (messages reach its workers)."""

    runtime: Runtime
    delivers: bool


_host: Host | None = None


def run_inside(runtime: Runtime | None, delivers: bool = False) -> None:
    """Make the commands of this process use a server's runtime (None: their own again)."""
    global _host
    _host = Host(runtime, delivers) if runtime is not None else None


def in_server() -> bool:
    """Whether this command runs inside a server (for a command line elsewhere)."""
    return _host is not None


def load_settings() -> Settings:
    return _host.runtime.settings if _host else load_settings_or_exit()


def sends_messages(settings: Settings) -> bool:
    """Whether a message this command sends reaches a worker (a stub broker started by a
    command lives and dies with it)."""
    return _host.delivers if _host else not settings.broker_url.startswith("stub://")


def ensure_broker() -> None:
    """Set the broker up before sending (a server's is already set up)."""
    if _host is None:
        from crawlsched.brokers import setup_broker

        setup_broker(load_settings())


# A write that raised one of these may have been applied, in part or in whole: the request left
# and no answer came (the connection dropped, the operation was cancelled or timed out).
UNANSWERED_WRITE_ERRORS = (
    pymongo.errors.AutoReconnect,
    pymongo.errors.ExecutionTimeout,
    pymongo.errors.WTimeoutError,
)


@contextmanager
def unanswered_writes(what: str, safe: str) -> Iterator[None]:
    """Around a bulk write: a write MongoDB never answered is one error saying its outcome is
    unknown and what is safe to do (`safe`), not "MongoDB unreachable" as if nothing left."""
    try:
        yield
    except pymongo.errors.ServerSelectionTimeoutError:
        raise  # no server to send it to: it never left (MongoDB unreachable)
    except UNANSWERED_WRITE_ERRORS as e:
        raise WriteOutcomeUnknown(what, e, safe) from None


@contextmanager
def cli_runtime(settings: Settings | None = None) -> Iterator[Runtime]:
    """A runtime for one command; crawlsched errors become one red line and exit code 2 (bad
    input, unknown names) or 1 (anything else that failed)."""
    settings = settings or load_settings()
    try:
        with services_or_exit(settings):
            yield _host.runtime if _host else Runtime(settings)
    except CrawlschedError as e:
        print_error(str(e))
        # Bad input and unknown names are the caller's to fix (2); the rest failed (1).
        raise typer.Exit(2 if isinstance(e, ValueError | LookupError) else 1) from None


def invocation(ctx: typer.Context) -> Invocation:
    """Who this command runs for (`crawlsched.cli.run`'s `invocation`; here: the local user)."""
    found = ctx.obj
    return found if isinstance(found, Invocation) else LOCAL


def read_file(ctx: typer.Context, value: str, what: str) -> Path:
    """The file a command reads for the argument `value`, which must exist: a local file, or
    a remote caller's upload (`RemoteRefused` for any other path)."""
    path = invocation(ctx).reads(value, what)
    if not path.is_file():
        bad_input(f"{what}: no file {value}")
    return path


def print_json(doc: Any) -> None:
    """One JSON document on one line: ISO 8601 dates, ids as strings (as the API answers)."""
    print(json.dumps(plain(doc)), flush=True)


def labelled(label: str, style: str, message: str) -> Text:
    """`label` in `style`, then `message` as it is (never read as markup)."""
    return Text.assemble((label, style), " ", message)


def print_error(message: str) -> None:
    """One line on stderr: a red `error:`, then `message` as it is."""
    err_console.print(labelled("error:", "red", message), soft_wrap=True, highlight=False)


def bad_input(message: str) -> NoReturn:
    """Unknown ids and bad arguments: one red line, exit code 2, nothing changed."""
    print_error(message)
    raise typer.Exit(2)

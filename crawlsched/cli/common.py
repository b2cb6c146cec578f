"""What every command shares: the consoles, JSON lines, errors as exit codes, and the
backend a command works through (`cli/connect.py`). Light on purpose: a command that goes
through a server imports no store and no broker."""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any, NoReturn

import typer
from rich.console import Console, ConsoleDimensions
from rich.table import Table
from rich.text import Text

from crawlsched.cli.backend import Backend
from crawlsched.cli.connect import backend as _backend

if TYPE_CHECKING:
    from crawlsched.settings import Settings

# Piped or captured (a file, a pager): this many columns at most.
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


def load_settings() -> Settings:
    """The settings, from the environment (one line and exit 2 for a bad one)."""
    from crawlsched.settings import load_settings_or_exit

    return load_settings_or_exit()


def backend(ctx: typer.Context) -> Backend:
    """The store or the server this command works through (decided once, at the edge)."""
    return _backend(ctx)


def print_json(doc: Any) -> None:
    """One JSON document on one line, as the API answers it (ISO 8601 dates, ids as
    strings: the backends hand over the API's own JSON)."""
    print(json.dumps(doc), flush=True)


def print_lines(docs: list[dict[str, Any]]) -> None:
    for doc in docs:
        print_json(doc)


def labelled(label: str, style: str, message: str) -> Text:
    """`label` in `style`, then `message` as it is (never read as markup)."""
    return Text.assemble((label, style), " ", message)


def print_error(message: str) -> None:
    """One line on stderr: a red `error:`, then `message` as it is."""
    err_console.print(labelled("error:", "red", message), soft_wrap=True, highlight=False)


def note(message: str) -> None:
    err_console.print(labelled("note:", "yellow", message), soft_wrap=True, highlight=False)


def bad_input(message: str) -> NoReturn:
    """Unknown ids and bad arguments: one red line, exit code 2, nothing changed."""
    print_error(message)
    raise typer.Exit(2)

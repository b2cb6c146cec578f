"""What every command shares: settings from the environment, a runtime, errors as exit codes."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import NoReturn

import typer
from rich.console import Console

from crawlsched.errors import CrawlschedError
from crawlsched.runtime import Runtime
from crawlsched.services import services_or_exit
from crawlsched.settings import Settings, load_settings_or_exit

# Tables of run ids and queue names need room; a pipe would otherwise get rich's 80 columns.
console = Console(width=None if Console().is_terminal else 140)
err_console = Console(stderr=True)


def load_settings() -> Settings:
    return load_settings_or_exit()


@contextmanager
def cli_runtime(settings: Settings | None = None) -> Iterator[Runtime]:
    """A runtime for one command; crawlsched errors become a red line and exit code 1."""
    settings = settings or load_settings()
    try:
        with services_or_exit(settings):
            yield Runtime(settings)
    except CrawlschedError as e:
        err_console.print(f"[red]error:[/red] {e}", soft_wrap=True)
        raise typer.Exit(1) from None


def bad_input(message: str) -> NoReturn:
    """Unknown ids and bad arguments: one red line, exit code 2, nothing changed."""
    err_console.print(f"[red]error:[/red] {message}", soft_wrap=True)
    raise typer.Exit(2)

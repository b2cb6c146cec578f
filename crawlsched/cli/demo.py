"""`crawlsched demo` (being written)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    @app.command("demo")
    def demo() -> None:
        """Run the whole system in one process on embedded defaults."""
        raise typer.Exit(1)

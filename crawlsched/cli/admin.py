"""Operator commands: init-db, the clock process, drivers (and `sweep-now`, the old spelling
of `schedules fire`)."""

from __future__ import annotations

import typer

from crawlsched.cli import ops
from crawlsched.cli.common import backend, bad_input, console, load_settings, print_lines


def _reference(path: str) -> dict:
    """A reference file (YAML) read here, checked where it is loaded."""
    import yaml

    try:
        with open(path, encoding="utf-8") as f:
            data = yaml.safe_load(f)
    except OSError as e:
        bad_input(f"--reference: cannot read {path}: {e.strerror or e}")
    except yaml.YAMLError as e:
        bad_input(f"--reference: {path} is not YAML: {str(e).splitlines()[0]}")
    if not isinstance(data, dict):
        bad_input(f"--reference: {path} holds no mapping of models, media and tasks")
    return data


def register(app: typer.Typer) -> None:
    @app.command("init-db")
    def init_db(
        ctx: typer.Context,
        reference: str | None = typer.Option(
            None,
            help="Reference YAML (models, media, tasks); default: settings, then the packaged one.",
        ),
    ) -> None:
        """Create every index, load reference data and the two default sweeps. Safe to re-run."""
        data = _reference(reference) if reference is not None else None
        loaded = backend(ctx).call(ops.INIT_DB, reference=data)
        console.print(
            f"indexes ready; loaded {loaded['models']} models, {loaded['media']} media, "
            f"{loaded['tasks']} tasks; {loaded['sweeps_added']} default sweeps added"
        )

    from crawlsched.cli.schedules import fire

    app.command("sweep-now", hidden=True, help="Old spelling of `schedules fire`.")(fire)

    @app.command("drivers")
    def drivers(ctx: typer.Context, as_json: bool = typer.Option(False, "--json")) -> None:
        """Crawl drivers available to workers (built-ins and plug-ins)."""
        rows = backend(ctx).call(ops.DRIVERS)["items"]
        if as_json:
            print_lines(rows)
            return
        for row in rows:
            console.print(row["driver"])

    @app.command("clock")
    def clock(
        interval: float | None = typer.Option(
            None, min=0.1, help="Seconds between ticks (default: CRAWLSCHED_CLOCK_INTERVAL_S)."
        ),
        count: int = typer.Option(0, min=0, help="Stop after this many ticks (0: run forever)."),
    ) -> None:
        """Send a tick every few seconds. Several clocks may run: a duplicate tick is harmless."""
        from crawlsched.cli.clock import run_clock_process

        run_clock_process(load_settings(), interval, count)

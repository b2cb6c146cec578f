"""Operator commands: init-db, the clock process, drivers (and `sweep-now`, the old spelling
of `schedules fire`)."""

from __future__ import annotations

import signal
import threading

import typer

from crawlsched.cli.common import (
    cli_runtime,
    console,
    err_console,
    load_settings,
    print_json,
    read_file,
    unanswered_writes,
)
from crawlsched.drivers import registry
from crawlsched.flow.clocking import run_clock
from crawlsched.logs import configure_logging, get_logger
from crawlsched.reference import load_reference
from crawlsched.services import check_broker, services_or_exit

log = get_logger(__name__)


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
        settings = load_settings()
        given = read_file(ctx, reference, "--reference") if reference is not None else None
        with cli_runtime(settings) as rt:
            data = load_reference(given or settings.reference_file)
            with unanswered_writes("init-db's writes", "init-db is safe to run again."):
                rt.create_indexes()
                loaded = rt.reference.load(data)
                added = rt.schedules.ensure_defaults(rt.now())
            if rt.settings.mongo_url.startswith("mongomock://"):
                err_console.print(
                    "note: this is the embedded store of this one command: what it loads is "
                    "gone when it ends. Run `crawlsched standalone` to keep data, or set "
                    "CRAWLSCHED_MONGO_URL"
                )
            console.print(
                f"indexes ready; loaded {loaded['models']} models, {loaded['media']} media, "
                f"{loaded['tasks']} tasks; {added} default sweeps added"
            )

    from crawlsched.cli.schedules import fire

    app.command("sweep-now", hidden=True, help="Old spelling of `schedules fire`.")(fire)

    @app.command("drivers")
    def drivers(as_json: bool = typer.Option(False, "--json")) -> None:
        """Crawl drivers available to workers (built-ins and plug-ins)."""
        settings = load_settings()
        registry.load_plugins(settings.driver_modules)
        for name in registry.known():
            if as_json:
                print_json({"driver": name})
            else:
                console.print(name)

    @app.command("clock")
    def clock(
        interval: float | None = typer.Option(
            None, min=0.1, help="Seconds between ticks (default: CRAWLSCHED_CLOCK_INTERVAL_S)."
        ),
        count: int = typer.Option(0, min=0, help="Stop after this many ticks (0: run forever)."),
    ) -> None:
        """Send a tick every few seconds. Several clocks may run: a duplicate tick is harmless."""
        settings = load_settings()
        from crawlsched.brokers import setup_broker

        with services_or_exit(settings):
            broker = setup_broker(settings)
            check_broker(settings, getattr(broker, "parameters", None))
        from crawlsched.actors.ticker import tick

        configure_logging(settings.log_format, settings.log_level)
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        signal.signal(signal.SIGINT, lambda *_: stop.set())
        period = interval or settings.clock_interval_s
        clock_metrics = None
        if settings.clock_metrics_address:
            from crawlsched.metrics.clock import serve_clock_metrics

            clock_metrics = serve_clock_metrics(settings, settings.clock_metrics_address)
        log.info("clock_started", interval_s=period, metrics=settings.clock_metrics_address)
        with services_or_exit(settings):
            run_clock(
                tick.send,
                period_s=period,
                stop=stop,
                count=count,
                broker=broker,
                on_sent=clock_metrics.tick_sent if clock_metrics else None,
            )

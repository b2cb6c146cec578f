"""The `crawlsched` command: the command line and the servers it starts, composed here.

`crawlsched.cli` (the commands) and `crawlsched.api` (the HTTP API) do not import each other.
This module adds the two commands that serve the API (`api serve`, `standalone`) to the
command line; the command line reaches a running server through its typed routes, over HTTP.
"""

from __future__ import annotations

import signal
import sys

import typer

from crawlsched import __version__

HOST = typer.Option(None, help="Address to listen on (default: CRAWLSCHED_API_HOST, 127.0.0.1).")
PORT = typer.Option(None, min=0, max=65535, help="Port (default: CRAWLSCHED_API_PORT, 8080).")


def api_serve(host: str | None = HOST, port: int | None = PORT) -> None:
    """Serve the API on the configured MongoDB and broker (other processes run the workers)."""
    from crawlsched.api import create_app
    from crawlsched.api.serving import api_server
    from crawlsched.cli.common import console, load_settings
    from crawlsched.runtime import Runtime
    from crawlsched.services import services_or_exit

    settings = load_settings()
    delivers = not settings.broker_url.startswith("stub://")
    with services_or_exit(settings):
        if delivers:
            from crawlsched.brokers import setup_broker

            setup_broker(settings)
        rt = Runtime(settings)
        rt.create_indexes()
    metrics = None
    if settings.api_metrics_address:
        from crawlsched.api.metrics import serve_api_metrics

        metrics = serve_api_metrics(settings.api_metrics_address)
    api = create_app(rt, delivers=delivers, metrics=metrics)
    where = f"{host or settings.api_host}:{settings.api_port if port is None else port}"
    console.print(f"crawlsched API on http://{where} (docs at /docs)")
    # uvicorn finishes the requests under way on SIGTERM, then raises the signal again with
    # the handler it found: this one makes that a clean exit 0 (not "killed by SIGTERM").
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    api_server(
        api, host or settings.api_host, settings.api_port if port is None else port, settings
    ).run()


def standalone(
    host: str | None = HOST,
    port: int | None = PORT,
    threads: int = typer.Option(4, min=1, max=64, help="In-process worker threads."),
) -> None:
    """API, status page, clock and workers in one process on the embedded store, keeping
    its data in CRAWLSCHED_DATA_DIR across restarts (no MongoDB or RabbitMQ needed)."""
    from crawlsched.cli.common import load_settings, print_error
    from crawlsched.errors import CrawlschedError
    from crawlsched.services import services_or_exit
    from crawlsched.standalone.preflight import CannotStart, check_data_dir, check_port
    from crawlsched.standalone.server import serve

    settings = load_settings()
    host = host or settings.api_host
    port = settings.api_port if port is None else port
    try:
        # Before anything is set up: a server that cannot keep data or listen says so alone.
        check_data_dir(settings.data_dir)
        check_port(host, port)
        with services_or_exit(settings):
            serve(settings, host, port, threads)
    except CannotStart as e:
        print_error(str(e))
        raise typer.Exit(e.code) from None
    except (CrawlschedError, OSError) as e:
        print_error(str(e))
        raise typer.Exit(1) from None


_composed = False


def compose() -> typer.Typer:
    """The command line with the two commands that serve the API."""
    global _composed
    from crawlsched.cli import app

    if not _composed:
        api_app = typer.Typer(help="Serve the HTTP API.", no_args_is_help=True)
        api_app.command("serve")(api_serve)
        app.add_typer(api_app, name="api")
        app.command("standalone")(standalone)
        _composed = True
    return app


def main() -> None:
    """The `crawlsched` command."""
    args = sys.argv[1:]
    if args == ["--version"]:  # asked by scripts and installers: no command line to build
        print(f"crawlsched {__version__}")
        raise SystemExit(0)
    compose()
    from crawlsched.cli import run

    raise SystemExit(run(args, own_process=True))

"""The `crawlsched` command: the command line and the servers it starts, composed here.

`crawlsched.cli` (the commands) and `crawlsched.api` (the HTTP API) do not import each other.
This module adds the two commands that serve the API (`api serve`, `standalone`) to the
command line, and hands the API the command line's `run` for `POST /v1/cli`, which runs a
command there for a remote caller (`crawlsched.invocation`).
"""

from __future__ import annotations

import sys

import typer

from crawlsched.cli import app, run
from crawlsched.cli.common import cli_runtime, load_settings, print_error, run_inside
from crawlsched.errors import CrawlschedError

api_app = typer.Typer(help="Serve the HTTP API.", no_args_is_help=True)

HOST = typer.Option(None, help="Address to listen on (default: CRAWLSCHED_API_HOST, 127.0.0.1).")
PORT = typer.Option(None, min=0, max=65535, help="Port (default: CRAWLSCHED_API_PORT, 8080).")


@api_app.command("serve")
def api_serve(host: str | None = HOST, port: int | None = PORT) -> None:
    """Serve the API on the configured MongoDB and broker (other processes run the workers)."""
    from crawlsched.api import create_app
    from crawlsched.api.serving import api_server
    from crawlsched.cli.common import console

    settings = load_settings()
    delivers = not settings.broker_url.startswith("stub://")
    if delivers:
        from crawlsched.brokers import setup_broker

        setup_broker(settings)
    with cli_runtime(settings) as rt:
        rt.create_indexes()
    run_inside(rt, delivers)
    api = create_app(rt, delivers=delivers, run_command=run)
    where = f"{host or settings.api_host}:{settings.api_port if port is None else port}"
    console.print(f"crawlsched API on http://{where} (docs at /docs)")
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
    from crawlsched.services import services_or_exit
    from crawlsched.standalone.server import serve

    settings = load_settings()
    try:
        with services_or_exit(settings):
            serve(
                settings,
                host or settings.api_host,
                settings.api_port if port is None else port,
                threads,
                run_command=run,
                attach=run_inside,
            )
    except (CrawlschedError, OSError) as e:
        print_error(str(e))
        raise typer.Exit(1) from None


app.add_typer(api_app, name="api")
app.command("standalone")(standalone)


def main() -> None:
    """The `crawlsched` command: through a running API when one applies, else here."""
    from crawlsched.cli.remote import main_argv

    code = main_argv(sys.argv[1:])
    if code is None:
        code = run(sys.argv[1:])
    raise SystemExit(code)

"""`crawlsched crawl URL…`: crawl a site (or several start URLs) in one command, with a live
progress bar, the run's summary at the end and an exit code that says how it ended; `-o FILE`
writes the items as they are stored.

Through a running server (a standalone found in the data directory, CRAWLSCHED_API_URL) or on
MongoDB with RabbitMQ, the run is kept there. With neither, the crawl runs here on embedded
defaults and keeps nothing, as `crawlsched demo` does."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Any

import typer

from crawlsched.catalog import DEFAULT_WEBSITE_MEDIA, MAX_DEPTH, MAX_PAGES
from crawlsched.cli import ops
from crawlsched.cli.backend import Backend
from crawlsched.cli.common import bad_input, console, err_console, load_settings, note
from crawlsched.cli.export import FORMATS, Exporter, format_of
from crawlsched.cli.watch import follow

INTERRUPTED = 130


@contextmanager
def _where(ctx: typer.Context, threads: int, delay: float | None) -> Any:
    """(backend, kept): a server's or a store's that keeps the run, else an embedded system."""
    from crawlsched.cli.connect import backend_for, running_server_of

    root = ctx.find_root()
    found = root.obj if isinstance(root.obj, dict) else {}
    settings = found.get("settings") or load_settings()
    if found.get("backend") is not None:
        yield found["backend"], True
        return
    if found.get("own_process") and (settings.api_url or running_server_of(settings)):
        yield backend_for(settings, ctx.command_path), True
        return
    if not settings.mongo_url.startswith("mongomock://") and not settings.broker_url.startswith(
        "stub://"
    ):
        yield backend_for(settings, ctx.command_path), True
        return
    from crawlsched.cli.local_crawl import embedded_system

    with embedded_system(settings, threads, delay) as local:
        yield local, False


def _politeness(api: Backend, urls: list[str], delay: float) -> None:
    """Through a server: each start host's own delay (`hosts set`), kept there."""
    from urllib.parse import urlsplit

    for url in urls:
        parts = urlsplit(url)
        api.call(ops.HOST_LIMITS, host=f"{parts.scheme}://{parts.netloc}", delay_s=delay, new=True)


def register(app: typer.Typer) -> None:
    @app.command("crawl")
    def crawl(
        ctx: typer.Context,
        urls: list[str] = typer.Argument(..., help="Start URLs (http or https)."),
        depth: int = typer.Option(2, "--depth", min=0, max=MAX_DEPTH, help="Links deep."),
        max_pages: int = typer.Option(
            100, "--max-pages", min=0, max=MAX_PAGES, help="Pages found from each start URL."
        ),
        delay: float | None = typer.Option(
            None,
            "--delay",
            min=0,
            max=60,
            help="Seconds between two requests to one host (through a server: the start "
            "hosts' own delay, kept there; default: the settings').",
        ),
        output: str | None = typer.Option(
            None, "-o", "--output", help="Write the items here: .jsonl, .json or .csv."
        ),
        media: str = typer.Option(DEFAULT_WEBSITE_MEDIA, help="Media whose driver crawls them."),
        threads: int = typer.Option(4, min=1, max=64, help="Workers here (with no server)."),
    ) -> None:
        """Crawl a site now and follow it to its end: the run's summary, and exit 0 if it
        succeeded, 3 incomplete, 4 failed, 5 stopped. Stays on each start URL's site."""
        if output is not None and format_of(output) is None:
            bad_input(f"-o: {output}: write .jsonl, .json or .csv ({', '.join(FORMATS)})")
        with _where(ctx, threads, delay) as (api, kept):
            if delay is not None and kept:
                _politeness(api, urls, delay)
            started = api.call(ops.CRAWL, urls=urls, depth=depth, max_pages=max_pages, media=media)
            run_id = started["run_id"]
            where = "" if kept else " on an embedded store that ends with this command"
            err_console.print(
                f"crawling {len(urls)} start URL(s), {depth} links deep, at most {max_pages} "
                f"pages from each: run {run_id}{where}",
                highlight=False,
            )
            code = _follow(api, run_id, output, kept)
        raise typer.Exit(code)


def _follow(api: Backend, run_id: str, output: str | None, kept: bool) -> int:
    exporter = Exporter(api, run_id, Path(output)) if output else None
    try:
        code = follow(api, run_id, each_round=exporter.poll if exporter else None)
    except KeyboardInterrupt:
        if exporter is not None:
            exporter.out.close()
        if kept:
            note(f"interrupted: run {run_id} goes on (`crawlsched run stop {run_id}`)")
        else:
            note("interrupted: the crawl stops")
        return INTERRUPTED
    if exporter is not None:
        console.print(f"{exporter.finish()} items written to {output}")
    return code

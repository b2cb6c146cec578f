"""`crawlsched accounts …`, `crawlsched nodes …` and `crawlsched pools`: the resource pools."""

from __future__ import annotations

import sys
from typing import Any

import typer
from rich.table import Table

from crawlsched.cli.common import (
    bad_input,
    cli_runtime,
    console,
    invocation,
    load_settings,
    print_json,
    read_file,
)
from crawlsched.errors import UnknownMedia
from crawlsched.flow import views
from crawlsched.flow.destinations import check_node
from crawlsched.flow.resource_events import set_account_status
from crawlsched.resources import rules
from crawlsched.resources.node_probe import probe_node
from crawlsched.resources.rules import AccountLimits
from crawlsched.resources.secrets import generate_key

accounts_app = typer.Typer(help="Login accounts, per media (secrets encrypted at rest).")
nodes_app = typer.Typer(help="Selenium nodes: Grid 4 hubs/standalones or plain chromedrivers.")


def _when(value: Any) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S") if value else "-"


def _read_secret(ctx: typer.Context, secret_file: str | None, secret_env: str | None) -> str:
    if secret_file is not None and secret_env is not None:
        raise typer.BadParameter("give --secret-file or --secret-env, not both")
    if secret_file is not None:
        secret = read_file(ctx, secret_file, "--secret-file").read_text().strip()
    elif secret_env is not None:
        secret = invocation(ctx).environment(secret_env, "--secret-env")
        if not secret:
            raise typer.BadParameter(f"environment variable {secret_env} is empty or unset")
    elif sys.stdin.isatty():
        secret = typer.prompt("secret", hide_input=True, confirmation_prompt=True)
    else:
        raise typer.BadParameter(
            "no secret: use --secret-file FILE or --secret-env VAR (no terminal to prompt on)"
        )
    if not secret:
        raise typer.BadParameter("the secret is empty")
    return secret


@accounts_app.command("add")
def accounts_add(
    ctx: typer.Context,
    media: str = typer.Argument(..., help="Media name, e.g. twitter."),
    username: str = typer.Argument(...),
    secret_file: str | None = typer.Option(None, help="Read the secret from this file."),
    secret_env: str | None = typer.Option(
        None, help="Read the secret from this environment variable."
    ),
    max_concurrent: int = typer.Option(1, min=1, max=100, help="Batches using it at once."),
    cooldown_s: float = typer.Option(0.0, min=0, max=7 * 86400, help="Rest after each use."),
    rate_uses: int | None = typer.Option(None, min=1, help="At most this many uses per window."),
    rate_window_s: float | None = typer.Option(None, min=1, max=7 * 86400, help="The window."),
) -> None:
    """Add an account (or update its secret and limits). Never pass the secret as an argument:
    it would land in shell history and process lists; without --secret-file/--secret-env you
    are prompted."""
    try:
        limits = AccountLimits(max_concurrent, cooldown_s, rate_uses, rate_window_s)
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None
    secret = _read_secret(ctx, secret_file, secret_env)
    with cli_runtime() as rt:
        if rt.reference.media_by_name(media) is None:
            raise UnknownMedia(media, sorted(m["media_name"] for m in rt.reference.media()))
        new = rt.inventory.add_account(media, username, secret, limits, rt.now())
        console.print(f"account {username} {'added' if new else 'updated'} for {media}")


@accounts_app.command("list")
def accounts_list(
    media: str | None = typer.Option(None, help="Only this media."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Accounts with their state and load (never their secrets)."""
    with cli_runtime() as rt:
        rows = views.account_rows(rt, media)
        if as_json:
            for row in rows:
                print_json(row)
            return
        table = Table(title="Accounts")
        for column in ("media", "username", "state", "held", "until", "reason"):
            table.add_column(column)
        for row in rows:
            table.add_row(
                row["media"],
                row["username"],
                row["state"],
                f"{row['held']}/{row['max_concurrent']}",
                _when(row["cooling_until"]) if row["state"] == rules.COOLING else "-",
                row["reason"] or "-",
            )
        console.print(table)


def _set_status(media: str, username: str, status: str, reason: str | None) -> None:
    with cli_runtime() as rt:
        set_account_status(rt, media, username, status, reason)
        console.print(f"account {username} ({media}) is now {status}")


@accounts_app.command("ban")
def accounts_ban(
    media: str, username: str, reason: str = typer.Option("banned by an operator")
) -> None:
    """Never lease this account until it is enabled again."""
    _set_status(media, username, rules.BANNED, reason)


@accounts_app.command("disable")
def accounts_disable(media: str, username: str) -> None:
    """Take the account out of the pool (current leases finish)."""
    _set_status(media, username, rules.DISABLED, "disabled by an operator")


@accounts_app.command("enable")
def accounts_enable(media: str, username: str) -> None:
    """Make a banned, disabled or cooling account usable again now."""
    _set_status(media, username, rules.ACTIVE, None)


@accounts_app.command("keygen")
def accounts_keygen() -> None:
    """Print a new CRAWLSCHED_SECRET_KEY (keep it safe: without it secrets cannot be read)."""
    print(generate_key())


@nodes_app.command("add")
def nodes_add(
    ctx: typer.Context,
    url: str = typer.Argument(..., help="e.g. http://127.0.0.1:4444 (Grid) or :9515 (driver)"),
    slots: int | None = typer.Option(
        None, min=1, max=1000, help="Browsers at once (a plain chromedriver: default 1)."
    ),
) -> None:
    """Probe a node's /status and add it. A Grid's capacity comes from its slots."""
    settings = load_settings()
    url = url.rstrip("/")
    with cli_runtime(settings) as rt:
        try:
            # Where any caller's node may be (CRAWLSCHED_NODE_ALLOW_NETWORKS), probed through
            # the client that checks every address as it connects.
            check_node(settings, url)
            status = probe_node(url, rt.probe_http)
        except ValueError as e:  # a refused address, not a node URL, or not a WebDriver
            bad_input(str(e))
        if not status.ready:
            raise typer.BadParameter(f"{url} is not ready: {status.message}")
        capacity = slots or status.capacity or 1
        new = rt.inventory.add_node(url, status.kind, capacity, rt.now())
        verb = "added" if new else "updated"
        console.print(f"node {url} {verb}: {status.kind}, {capacity} slot(s)")


@nodes_app.command("list")
def nodes_list(as_json: bool = typer.Option(False, "--json")) -> None:
    """Nodes with their state, load and last probe."""
    with cli_runtime() as rt:
        rows = views.node_rows(rt)
        if as_json:
            for row in rows:
                print_json(row)
            return
        table = Table(title="Selenium nodes")
        for column in ("url", "kind", "state", "held", "checked", "reason"):
            table.add_column(column)
        for row in rows:
            table.add_row(
                row["url"],
                row["kind"] or "-",
                row["state"],
                f"{row['held']}/{row['capacity']}",
                _when(row["checked_at"]),
                row["reason"] or "-",
            )
        console.print(table)


@nodes_app.command("drain")
def nodes_drain(url: str, undo: bool = typer.Option(False, "--undo", help="Take leases again.")):
    """No new leases on this node; the batches on it now finish."""
    with cli_runtime() as rt:
        rt.inventory.set_draining(url.rstrip("/"), not undo)
        console.print(f"node {url} {'takes leases again' if undo else 'is draining'}")


@nodes_app.command("remove")
def nodes_remove(url: str) -> None:
    """Forget a node. Batches running on it stop at their next lease renewal and wait again."""
    with cli_runtime() as rt:
        rt.inventory.remove_node(url.rstrip("/"))
        console.print(f"node {url} removed")


def waiting_rows(rt, waiting: list[dict[str, Any]]) -> list[list[str]]:
    """Waiting batches grouped by what they wait for: batches, jobs, the oldest wait."""
    return [
        [
            g["waits_for"],
            g["media"],
            str(g["batches"]),
            str(g["jobs"]),
            f"{g['oldest_wait_s']:.0f}s",
        ]
        for g in views.waiting_groups(rt, waiting)
    ]


def waiting_table(
    rt, waiting: list[dict[str, Any]], title: str = "Waiting for a resource"
) -> Table:
    table = Table(title=title)
    for column in ("waits for", "media", "batches", "jobs", "oldest wait"):
        table.add_column(column)
    for row in waiting_rows(rt, waiting):
        table.add_row(*row)
    return table


def register(app: typer.Typer) -> None:
    app.add_typer(accounts_app, name="accounts")
    app.add_typer(nodes_app, name="nodes")

    app.add_typer(pools_app, name="pools")


pools_app = typer.Typer(
    help="Capacity and use of each pool, and what waits for what (`pools show`).",
    invoke_without_command=True,
)


@pools_app.callback()
def _pools(ctx: typer.Context, as_json: bool = typer.Option(False, "--json")) -> None:
    """Capacity and use of each pool, and what waits for what (`pools show`)."""
    if ctx.invoked_subcommand is None:  # `crawlsched pools`, the old spelling
        show(as_json)


@pools_app.command("show")
def show(as_json: bool = typer.Option(False, "--json")) -> None:
    """Capacity and use of each pool, and what waits for what."""
    with cli_runtime() as rt:
        if as_json:
            print_json(views.pools_overview(rt))
            return
        table = Table(title="Resource pools")
        for column in ("pool", "resources", "usable", "capacity", "held"):
            table.add_column(column)
        for pool, row in rt.inventory.overview(rt.now()).items():
            table.add_row(pool, *(str(row[c]) for c in ("resources", "usable", "capacity", "held")))
        console.print(table)
        waiting = rt.waiting.all()
        if waiting:
            console.print(waiting_table(rt, waiting))
        else:
            console.print("no batch is waiting for a resource")

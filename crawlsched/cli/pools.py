"""`crawlsched accounts …`, `crawlsched nodes …` and `crawlsched pools`: the resource pools.

A secret is read here (a file, a variable of this shell, or a prompt) and sent with the
request: the store or server never reads a file or an environment variable for the caller."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from crawlsched.cli import ops
from crawlsched.cli.common import backend, bad_input, console, print_json, print_lines
from crawlsched.cli.text import when
from crawlsched.cli.waiting import waiting_table

accounts_app = typer.Typer(help="Login accounts, per media (secrets encrypted at rest).")
nodes_app = typer.Typer(help="Selenium nodes: Grid 4 hubs/standalones or plain chromedrivers.")
ALL = 10_000_000


def _when(value: Any) -> str:
    return when(value, "")


def read_secret(file: str | None, env: str | None, what: str = "secret") -> str:
    """A secret from a file (`--<what>-file`), a variable of this shell (`--<what>-env`), or a
    prompt on a terminal; never from the command line (shell history, process lists)."""
    if file is not None and env is not None:
        raise typer.BadParameter(f"give --{what}-file or --{what}-env, not both")
    if file is not None:
        try:
            secret = Path(file).read_text().strip()
        except OSError as e:
            raise typer.BadParameter(f"--{what}-file: cannot read {file}: {e.strerror}") from None
    elif env is not None:
        secret = os.environ.get(env, "")
        if not secret:
            raise typer.BadParameter(f"environment variable {env} is empty or unset")
    elif sys.stdin.isatty():
        secret = typer.prompt(what, hide_input=True, confirmation_prompt=True)
    else:
        raise typer.BadParameter(
            f"no {what}: use --{what}-file FILE or --{what}-env VAR (no terminal to prompt on)"
        )
    if not secret:
        raise typer.BadParameter(f"the {what} is empty")
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
    if (rate_uses is None) != (rate_window_s is None):
        bad_input("--rate-uses and --rate-window-s go together: give both or neither")
    secret = read_secret(secret_file, secret_env)
    done = backend(ctx).call(
        ops.ACCOUNT_ADD, media=media, username=username, secret=secret,
        max_concurrent=max_concurrent, cooldown_s=cooldown_s, rate_uses=rate_uses,
        rate_window_s=rate_window_s,
    )  # fmt: skip
    verb = "added" if done["added"] else "updated"
    console.print(f"account {username} {verb} for {media}")


@accounts_app.command("list")
def accounts_list(
    ctx: typer.Context,
    media: str | None = typer.Option(None, help="Only this media."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Accounts with their state and load (never their secrets)."""
    rows = backend(ctx).items(ops.ACCOUNTS, ALL, media=media)
    if as_json:
        print_lines(rows)
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
            _when(row["cooling_until"]) if row["state"] == "cooling" else "-",
            row["reason"] or "-",
        )
    console.print(table)


def _set_state(ctx: typer.Context, media: str, username: str, state: str, reason: str | None):
    done = backend(ctx).call(
        ops.ACCOUNT_STATE, media=media, username=username, state=state, reason=reason
    )
    console.print(f"account {username} ({media}) is now {done['state']}")


@accounts_app.command("ban")
def accounts_ban(
    ctx: typer.Context,
    media: str,
    username: str,
    reason: str = typer.Option("banned by an operator"),
) -> None:
    """Never lease this account until it is enabled again."""
    _set_state(ctx, media, username, "banned", reason)


@accounts_app.command("disable")
def accounts_disable(ctx: typer.Context, media: str, username: str) -> None:
    """Take the account out of the pool (current leases finish)."""
    _set_state(ctx, media, username, "disabled", None)


@accounts_app.command("enable")
def accounts_enable(ctx: typer.Context, media: str, username: str) -> None:
    """Make a banned, disabled or cooling account usable again now, for every task: its
    per-task rate locks and its kept login session are cleared too (the next batch logs in)."""
    _set_state(ctx, media, username, "active", None)


@accounts_app.command("keygen")
def accounts_keygen() -> None:
    """Print a new CRAWLSCHED_SECRET_KEY (keep it safe: without it secrets cannot be read)."""
    from crawlsched.resources.secrets import generate_key

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
    done = backend(ctx).call(ops.NODE_ADD, url=url.rstrip("/"), slots=slots)
    verb = "added" if done["added"] else "updated"
    console.print(f"node {done['url']} {verb}: {done['kind']}, {done['capacity']} slot(s)")


@nodes_app.command("list")
def nodes_list(ctx: typer.Context, as_json: bool = typer.Option(False, "--json")) -> None:
    """Nodes with their state, load and last probe."""
    rows = backend(ctx).items(ops.NODES, ALL)
    if as_json:
        print_lines(rows)
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
def nodes_drain(
    ctx: typer.Context, url: str, undo: bool = typer.Option(False, "--undo", help="Lease again.")
) -> None:
    """No new leases on this node; the batches on it now finish."""
    backend(ctx).call(ops.NODE_DRAIN, url=url.rstrip("/"), draining=not undo)
    console.print(f"node {url} {'takes leases again' if undo else 'is draining'}")


@nodes_app.command("remove")
def nodes_remove(ctx: typer.Context, url: str) -> None:
    """Forget a node. Batches running on it stop at their next lease renewal and wait again."""
    backend(ctx).call(ops.NODE_REMOVE, url=url.rstrip("/"))
    console.print(f"node {url} removed")


pools_app = typer.Typer(
    help="Capacity and use of each pool, and what waits for what (`pools show`).",
    invoke_without_command=True,
)


@pools_app.callback()
def _pools(ctx: typer.Context, as_json: bool = typer.Option(False, "--json")) -> None:
    """Capacity and use of each pool, and what waits for what (`pools show`)."""
    if ctx.invoked_subcommand is None:  # `crawlsched pools`, the old spelling
        show(ctx, as_json)


@pools_app.command("show")
def show(ctx: typer.Context, as_json: bool = typer.Option(False, "--json")) -> None:
    """Capacity and use of each pool, and what waits for what."""
    overview = backend(ctx).call(ops.POOLS)
    if as_json:
        print_json(overview)
        return
    table = Table(title="Resource pools")
    for column in ("pool", "resources", "usable", "capacity", "held"):
        table.add_column(column)
    for pool, row in overview["pools"].items():
        table.add_row(pool, *(str(row[c]) for c in ("resources", "usable", "capacity", "held")))
    console.print(table)
    if overview["waiting"]:
        console.print(waiting_table(overview["waiting"]))
    else:
        console.print("no batch is waiting for a resource")


def register(app: typer.Typer) -> None:
    app.add_typer(accounts_app, name="accounts")
    app.add_typer(nodes_app, name="nodes")
    app.add_typer(pools_app, name="pools")

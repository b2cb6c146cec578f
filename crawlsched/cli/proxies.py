"""`crawlsched proxies …` and `crawlsched accounts bind`: the proxy pool, and which proxy an
account goes out through.

A proxy's password is read here (a file, a variable of this shell, or a prompt) and sent with
the request, never taken on the command line; no command prints it back."""

from __future__ import annotations

import typer
from rich.table import Table

from crawlsched.cli import ops
from crawlsched.cli.common import backend, bad_input, console, print_json, print_lines
from crawlsched.cli.pools import ALL, accounts_app, read_secret
from crawlsched.cli.text import when

proxies_app = typer.Typer(
    help="Proxies: a third leased pool, with groups, cost tiers and accounts bound to them."
)


@proxies_app.command("add")
def proxies_add(
    ctx: typer.Context,
    name: str = typer.Argument(..., help="A name of letters, digits, '.', '-' or '_'."),
    url: str = typer.Argument(..., help="scheme://host:port (http, https, socks5), no login."),
    group: str = typer.Option("default", help="Its group (a media or an account names one)."),
    tier: int = typer.Option(0, min=0, max=9, help="Its cost tier: 0 the cheapest."),
    max_concurrent: int = typer.Option(1, min=1, max=1000, help="Batches through it at once."),
    username: str | None = typer.Option(None, help="The proxy's login, if it asks for one."),
    password_file: str | None = typer.Option(None, help="Read its password from this file."),
    password_env: str | None = typer.Option(
        None, help="Read its password from this environment variable."
    ),
) -> None:
    """Add a proxy (or change its address, group, tier, limit or login). Its credentials go
    in --username and a password (encrypted at rest), never in the URL; never pass the
    password as an argument: without --password-file/--password-env you are prompted."""
    password = None
    if username is not None:
        password = read_secret(password_file, password_env, "password")
    elif password_file is not None or password_env is not None:
        bad_input("a proxy's password goes with its --username")
    done = backend(ctx).call(
        ops.PROXY_ADD, name=name, url=url, group=group, tier=tier,
        max_concurrent=max_concurrent, username=username, password=password,
    )  # fmt: skip
    verb = "added" if done["added"] else "updated"
    console.print(f"proxy {name} {verb}: {done['url']}, group {done['group']}, tier {tier}")


@proxies_app.command("list")
def proxies_list(ctx: typer.Context, as_json: bool = typer.Option(False, "--json")) -> None:
    """Proxies with their state (active, cooling after failures, disabled), load and the
    accounts tied to each (never their passwords)."""
    rows = backend(ctx).items(ops.PROXIES, ALL)
    if as_json:
        print_lines(rows)
        return
    table = Table(title="Proxies")
    for column in ("name", "url", "group", "tier", "state", "held", "failures", "until"):
        table.add_column(column)
    table.add_column("accounts")
    table.add_column("reason")
    for row in rows:
        table.add_row(
            row["name"],
            row["url"],
            row["group"],
            str(row["tier"]),
            row["state"],
            f"{row['held']}/{row['max_concurrent']}",
            str(row["failures"]),
            when(row["cooling_until"], "") if row["state"] == "cooling" else "-",
            ", ".join(row["accounts"]) or "-",
            row["status_reason"] or "-",
        )
    console.print(table)


@proxies_app.command("enable")
def proxies_enable(ctx: typer.Context, name: str) -> None:
    """Lease this proxy again, now: a cooling proxy's rest and failures end too."""
    done = backend(ctx).call(ops.PROXY_STATE, name=name, enabled=True)
    console.print(f"proxy {name} is now {done['state']}")


@proxies_app.command("disable")
def proxies_disable(ctx: typer.Context, name: str) -> None:
    """No new leases on this proxy; the batches going out through it now finish."""
    done = backend(ctx).call(ops.PROXY_STATE, name=name, enabled=False)
    console.print(f"proxy {name} is now {done['state']}")


@proxies_app.command("remove")
def proxies_remove(ctx: typer.Context, name: str) -> None:
    """Forget a proxy. Accounts bound to it are unbound; batches going out through it lose
    their lease and wait again."""
    done = backend(ctx).call(ops.PROXY_REMOVE, name=name)
    console.print(f"proxy {name} removed ({done['unbound_accounts']} account(s) unbound)")


@proxies_app.command("tiers")
def proxies_tiers(ctx: typer.Context, as_json: bool = typer.Option(False, "--json")) -> None:
    """Each domain's proxy tier: it moves up after blocks in a row, and one batch tries the
    cheaper tier again later (a probe)."""
    found = backend(ctx).call(ops.PROXY_TIERS)
    if as_json:
        print_json(found)
        return
    offered = ", ".join(map(str, found["tiers"])) or "none (no enabled proxy)"
    console.print(f"tiers the enabled proxies offer: {offered}")
    table = Table(title="Domains")
    for column in ("domain", "tier", "blocks", "next probe"):
        table.add_column(column)
    for row in found["domains"]:
        table.add_row(row["domain"], str(row["tier"]), str(row["blocks"]), when(row["probe_at"]))
    console.print(table)


@accounts_app.command("bind")
def accounts_bind(
    ctx: typer.Context,
    media: str,
    username: str,
    proxy: str | None = typer.Option(None, help="Always go out through this proxy."),
    group: str | None = typer.Option(None, help="A proxy of this group, kept while it works."),
    none: bool = typer.Option(False, "--none", help="Unbind: any proxy its media allows."),
) -> None:
    """Bind an account to one proxy or to a group of proxies, or unbind it (--none). A site
    that sees one account arrive from many addresses bans it: a bound account keeps one."""
    if (proxy is not None) + (group is not None) + none != 1:
        bad_input("give one of --proxy NAME, --group GROUP or --none")
    done = backend(ctx).call(
        ops.ACCOUNT_BIND, media=media, username=username, proxy=proxy, group=group
    )
    binding = done["binding"] or {}
    to = f"proxy {binding['proxy']}" if "proxy" in binding else f"group {binding.get('group')}"
    console.print(f"account {username} ({media}) " + (f"bound to {to}" if binding else "unbound"))


def register(app: typer.Typer) -> None:
    app.add_typer(proxies_app, name="proxies")

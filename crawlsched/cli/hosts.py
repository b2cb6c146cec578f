"""`crawlsched hosts …`: the cluster's one clock per host (politeness), seen and steered.

A host is its origin (`https://example.com:443`); an operator may name it `example.com` (https
on 443) or by its whole origin (`http://127.0.0.1:8001`).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import typer
from rich.table import Table

from crawlsched.cli.common import bad_input, cli_runtime, console, print_json
from crawlsched.flow import views
from crawlsched.resources import host_rules

app = typer.Typer(help="Hosts as the cluster paces them: limits, holder, blocks, pages today.")


def _key(host: str) -> str:
    try:
        return host_rules.parse_host(host)
    except ValueError as e:
        bad_input(f"not a host: {host!r} ({e})")


def _when(value: Any) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S") if value else "-"


@app.command("list")
def hosts_list(as_json: bool = typer.Option(False, "--json", help="One JSON object per line.")):
    """Every host crawled so far: its limits, holder and requests in flight (as of its last
    renewal), next start, block and pages today."""
    with cli_runtime() as rt:
        rows = views.host_rows(rt)
        if as_json:
            for row in rows:
                print_json(row)
            return
        table = Table(title="Hosts")
        for column in (
            "host",
            "delay",
            "at once",
            "held by",
            "in flight",
            "next start",
            "blocked",
            "today",
        ):
            table.add_column(column, overflow="fold")
        for row in rows:
            blocked = _when(row["blocked_until"])
            if row["blocked_reason"]:
                blocked += f" ({row['blocked_reason']})"
            budget = f"/{row['daily_pages']}" if row["daily_pages"] else ""
            table.add_row(
                row["host"],
                f"{row['delay_s']:g} s",
                str(row["concurrency"]),
                row["held_by"] or "-",
                f"{row['in_flight']}/{row['concurrency']}" if row["held_by"] else "-",
                _when(row["next_start"]),
                blocked,
                f"{row['pages_today']}{budget}",
            )
        console.print(table)


@app.command("show")
def hosts_show(
    host: str = typer.Argument(..., help="example.com, or an origin: http://127.0.0.1:8001"),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """One host in full: its limits and where they come from, robots.txt, holder, block."""
    key = _key(host)
    with cli_runtime() as rt:
        doc = rt.hosts.get(key)
        if doc is None:
            bad_input(f"no host {key}: nothing was crawled there yet")
        row = views.host_row(rt, doc)
        if as_json:
            print_json(row)
            return
        for name, value in row.items():
            shown = _when(value) if hasattr(value, "strftime") else value
            console.print(f"{name:18} {shown if shown not in (None, {}, '') else '-'}")


@app.command("block")
def hosts_block(
    host: str = typer.Argument(...),
    for_s: float = typer.Option(3600.0, "--for", min=1, max=30 * 86400, help="Seconds."),
    reason: str = typer.Option("blocked by an operator", "--reason"),
) -> None:
    """Stop every worker from sending to the host for a while (batches wait for it)."""
    key = _key(host)
    with cli_runtime() as rt:
        now = rt.now()
        until, _began = rt.hosts.block(key, now + timedelta(seconds=for_s), reason, now)
        console.print(f"{key} blocked until {_when(until)}: {reason}")


@app.command("unblock")
def hosts_unblock(host: str = typer.Argument(...)) -> None:
    """Lift a block (an operator's, or a 429's) and reset the host's backoff."""
    key = _key(host)
    with cli_runtime() as rt:
        if not rt.hosts.unblock(key, rt.now()):
            bad_input(f"no host {key}: nothing was crawled there yet")
        console.print(f"{key} unblocked")


@app.command("set")
def hosts_set(
    host: str = typer.Argument(...),
    delay: float | None = typer.Option(None, "--delay", min=0, max=60, help="Seconds."),
    concurrency: int | None = typer.Option(None, "--concurrency", min=1, max=64),
    daily_pages: int | None = typer.Option(None, "--daily-pages", min=0, help="0: no cap."),
    clear: bool = typer.Option(False, "--clear", help="Forget this host's own limits."),
) -> None:
    """Give the host limits of its own (over its media's and the settings')."""
    key = _key(host)
    if clear == any(v is not None for v in (delay, concurrency, daily_pages)):
        bad_input("give --delay, --concurrency or --daily-pages, or --clear alone")
    limits = (
        dict.fromkeys(host_rules.POLICY_KEYS)
        if clear
        else {"delay_s": delay, "concurrency": concurrency, "daily_pages": daily_pages}
    )
    with cli_runtime() as rt:
        if not clear:
            limits = {k: v for k, v in limits.items() if v is not None}
        doc = rt.hosts.set_policy(key, limits, rt.now())
        row = views.host_row(rt, doc)
        console.print(
            f"{key}: {row['delay_s']:g} s between requests, {row['concurrency']} at once, "
            + (f"{row['daily_pages']} pages a day" if row["daily_pages"] else "no daily cap")
        )

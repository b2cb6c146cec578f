"""`crawlsched hosts …`: the cluster's one clock per host (politeness), seen and steered.

A host is named `example.com` (https on 443, or http on 80 if that is the one crawled),
`127.0.0.1:8001` (whichever scheme was crawled there), or by its whole origin
(`http://127.0.0.1:8001`). A host never crawled is changed only with `--new`.
"""

from __future__ import annotations

from typing import Any

import typer
from rich.table import Table

from crawlsched.cli import ops
from crawlsched.cli.common import backend, bad_input, console, print_json, print_lines
from crawlsched.cli.text import moment, soon, when

app = typer.Typer(help="Hosts as the cluster paces them: limits, holder, blocks, pages today.")

HOST = typer.Argument(..., help="example.com, 127.0.0.1:8001, or an origin: http://…:8001")
NEW = typer.Option(False, "--new", help="The host was never crawled: set it up all the same.")


def _when(value: Any) -> str:
    return when(value, "")


@app.command("list")
def hosts_list(
    ctx: typer.Context, as_json: bool = typer.Option(False, "--json", help="One JSON per line.")
) -> None:
    """Every host crawled so far: its limits, holder and requests in flight (as of its last
    renewal), next start, block and pages today."""
    rows = backend(ctx).items(ops.HOSTS, 10_000_000)
    if as_json:
        print_lines(rows)
        return
    # No outer frame, times of day: a host (one word, never split) and its figures fit 80
    # columns.
    table = Table(title="Hosts", show_edge=False, pad_edge=False)
    table.add_column("host", no_wrap=True)
    for column in ("delay", "at once", "held by", "in flight", "next start", "blocked", "today"):
        table.add_column(column, overflow="fold")
    for row in rows:
        blocked = soon(row["blocked_until"])
        if row["blocked_reason"]:
            blocked += f" ({row['blocked_reason']})"
        budget = f"/{row['daily_pages']}" if row["daily_pages"] else ""
        table.add_row(
            row["host"],
            f"{row['delay_s']:g} s",
            str(row["concurrency"]),
            row["held_by"] or "-",
            f"{row['in_flight']}/{row['concurrency']}" if row["held_by"] else "-",
            soon(row["next_start"]),
            blocked,
            f"{row['pages_today']}{budget}",
        )
    console.print(table)


@app.command("show")
def hosts_show(ctx: typer.Context, host: str = HOST, as_json: bool = typer.Option(False, "--json")):
    """One host in full: its limits and where they come from, robots.txt, holder, block."""
    row = backend(ctx).call(ops.HOST, host=host)
    if as_json:
        print_json(row)
        return
    for name, value in row.items():
        shown = _when(value) if moment(value) is not None else value
        console.print(f"{name:18} {shown if shown not in (None, {}, '') else '-'}")


@app.command("block")
def hosts_block(
    ctx: typer.Context,
    host: str = HOST,
    for_s: float = typer.Option(3600.0, "--for", min=1, max=30 * 86400, help="Seconds."),
    reason: str = typer.Option("blocked by an operator", "--reason"),
    new: bool = NEW,
) -> None:
    """Stop every worker from sending to the host for a while (batches wait for it)."""
    done = backend(ctx).call(ops.HOST_BLOCK, host=host, for_s=for_s, reason=reason, new=new)
    console.print(f"{done['host']} blocked until {_when(done['blocked_until'])}: {reason}")


@app.command("unblock")
def hosts_unblock(ctx: typer.Context, host: str = HOST) -> None:
    """Lift a block (an operator's, or a 429's) and reset the host's backoff."""
    done = backend(ctx).call(ops.HOST_UNBLOCK, host=host)
    console.print(f"{done['host']} unblocked")


@app.command("set")
def hosts_set(
    ctx: typer.Context,
    host: str = HOST,
    delay: float | None = typer.Option(None, "--delay", min=0, max=60, help="Seconds."),
    concurrency: int | None = typer.Option(None, "--concurrency", min=1, max=64),
    daily_pages: int | None = typer.Option(None, "--daily-pages", min=0, help="0: no cap."),
    clear: bool = typer.Option(False, "--clear", help="Forget this host's own limits."),
    new: bool = NEW,
) -> None:
    """Give the host limits of its own (over its media's and the settings')."""
    if clear == any(v is not None for v in (delay, concurrency, daily_pages)):
        bad_input("give --delay, --concurrency or --daily-pages, or --clear alone")
    row = backend(ctx).call(
        ops.HOST_LIMITS, host=host, delay_s=delay, concurrency=concurrency,
        daily_pages=daily_pages, clear=clear, new=new,
    )  # fmt: skip
    console.print(
        f"{row['host']}: {row['delay_s']:g} s between requests, {row['concurrency']} at once, "
        + (f"{row['daily_pages']} pages a day" if row["daily_pages"] else "no daily cap")
    )

"""`crawlsched tokens …` and `crawlsched store dump|load` (the commands that serve the API,
`standalone` and `api serve`, are added by `crawlsched.main`, which composes the command line
and the API).

A dump moves as a stream of gzipped tar bytes: `store load DIR` sends the folder (a standalone
data directory's `current` only), `store dump DIR` unpacks what comes back into DIR, within
CRAWLSCHED_API_MAX_UNPACKED_BYTES."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from crawlsched.cli import ops
from crawlsched.cli.common import (
    backend,
    bad_input,
    console,
    load_settings,
    print_json,
    print_lines,
)
from crawlsched.cli.text import when

tokens_app = typer.Typer(help="API tokens: create, list, revoke.", no_args_is_help=True)
store_app = typer.Typer(
    help="The store: counts (stats), a dump, or a dump loaded (mongodump format).",
    no_args_is_help=True,
)
ROLES = ("read", "admin")


def register(app: typer.Typer) -> None:
    app.add_typer(tokens_app, name="tokens")
    app.add_typer(store_app, name="store")


@tokens_app.command("create")
def tokens_create(
    ctx: typer.Context,
    role: str = typer.Option("read", help=f"One of: {', '.join(ROLES)}."),
    name: str = typer.Option(..., help="Who or what uses it, e.g. grafana."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Create a token; it is shown once (only its hash is stored)."""
    if role not in ROLES:
        bad_input(f"role must be one of {', '.join(ROLES)}, got {role!r}")
    row = backend(ctx).call(ops.TOKEN_ADD, role=role, name=name)
    if as_json:
        print_json(row)
        return
    console.print(f"token {row['_id']} ({role}, {name}); shown once, keep it safe:")
    print(row["token"])


@tokens_app.command("list")
def tokens_list(ctx: typer.Context, as_json: bool = typer.Option(False, "--json")) -> None:
    """Tokens with their role and whether they are revoked (never the tokens themselves)."""
    rows = backend(ctx).items(ops.TOKENS, 10_000_000)
    if as_json:
        print_lines(rows)
        return
    table = Table(title="API tokens")
    for column in ("id", "role", "name", "created", "revoked"):
        table.add_column(column)
    for row in rows:
        table.add_row(
            row["_id"],
            row["role"],
            row["name"],
            when(row["created_at"], "")[:16],
            when(row["revoked_at"], "")[:16],
        )
    console.print(table)


@tokens_app.command("revoke")
def tokens_revoke(
    ctx: typer.Context, token_id: str = typer.Argument(..., help="As shown by `tokens list`.")
) -> None:
    """Revoke a token: every request with it is refused from now on."""
    backend(ctx).call(ops.TOKEN_REVOKE, token_id=token_id)
    console.print(f"token {token_id} revoked")


@store_app.command("dump")
def store_dump(
    ctx: typer.Context,
    folder: str = typer.Argument(..., help="Where to write it (mongodump layout)."),
) -> None:
    """Write every collection as <folder>/<db>/<collection>.bson and .metadata.json."""
    from crawlsched.archives import untar_bounded

    bound = load_settings().api_max_unpacked_bytes
    chunks = backend(ctx).download(ops.STORE_DUMP)
    try:
        untar_bounded(chunks, Path(folder), bound)
    except ValueError as e:
        raise typer.BadParameter(f"the dump did not unpack into {folder}: {e}") from None
    except OSError as e:
        bad_input(f"cannot write {folder}: {e.strerror or e}")
    written = [p for p in Path(folder).rglob("*.bson")]
    console.print(f"{len(written)} collections written to {folder}")


@store_app.command("load")
def store_load(
    ctx: typer.Context,
    folder: str = typer.Argument(..., help="A mongodump folder, or a standalone data dir."),
    drop: bool = typer.Option(False, "--drop", help="Replace collections that hold documents."),
) -> None:
    """Load a dump (mongodump's, or a standalone data directory's `current`) into the store.
    Through a server, the server's own API tokens are kept (the dump's are not loaded)."""
    from crawlsched.archives import tar_chunks

    where = Path(folder)
    source = where / "current" if (where / "current").is_dir() else where
    if not source.is_dir():
        bad_input(f"FOLDER: no folder {folder}")
    answer = list(backend(ctx).upload(ops.STORE_LOAD, tar_chunks(source), drop=drop or None))
    loaded = answer[-1]
    console.print(
        f"{sum(loaded['loaded'].values())} documents loaded into "
        f"{len(loaded['loaded'])} collections"
    )
    if loaded["tokens_kept"]:
        console.print("the server's API tokens were kept: the dump's tokens were not loaded")

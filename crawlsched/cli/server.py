"""`crawlsched tokens …` and `crawlsched store dump|load` (the commands that serve the API,
`standalone` and `api serve`, are added by `crawlsched.main`, which composes the command line
and the API)."""

from __future__ import annotations

import typer
from rich.table import Table

from crawlsched.cli.common import (
    bad_input,
    cli_runtime,
    console,
    in_server,
    invocation,
    print_json,
    unanswered_writes,
)
from crawlsched.encoding import plain
from crawlsched.store.tokens import ROLES, TOKENS_COLLECTION

tokens_app = typer.Typer(help="API tokens: create, list, revoke.", no_args_is_help=True)
store_app = typer.Typer(
    help="The store: counts (stats), a dump, or a dump loaded (mongodump format).",
    no_args_is_help=True,
)


def register(app: typer.Typer) -> None:
    app.add_typer(tokens_app, name="tokens")
    app.add_typer(store_app, name="store")


@tokens_app.command("create")
def tokens_create(
    role: str = typer.Option("read", help=f"One of: {', '.join(ROLES)}."),
    name: str = typer.Option(..., help="Who or what uses it, e.g. grafana."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Create a token; it is shown once (only its hash is stored)."""
    if role not in ROLES:
        bad_input(f"role must be one of {', '.join(ROLES)}, got {role!r}")
    with cli_runtime() as rt:
        row, token = rt.tokens.create(role, name, rt.now())
    if as_json:
        print_json({**plain(row), "token": token})
        return
    console.print(f"token {row['_id']} ({role}, {name}); shown once, keep it safe:")
    print(token)


@tokens_app.command("list")
def tokens_list(as_json: bool = typer.Option(False, "--json")) -> None:
    """Tokens with their role and whether they are revoked (never the tokens themselves)."""
    with cli_runtime() as rt:
        rows = rt.tokens.all()
    if as_json:
        for row in rows:
            print_json(plain(row))
        return
    table = Table(title="API tokens")
    for column in ("id", "role", "name", "created", "revoked"):
        table.add_column(column)
    for row in rows:
        revoked = row["revoked_at"]
        table.add_row(
            row["_id"],
            row["role"],
            row["name"],
            f"{row['created_at']:%Y-%m-%d %H:%M}",
            f"{revoked:%Y-%m-%d %H:%M}" if revoked else "-",
        )
    console.print(table)


@tokens_app.command("revoke")
def tokens_revoke(token_id: str = typer.Argument(..., help="As shown by `tokens list`.")) -> None:
    """Revoke a token: every request with it is refused from now on."""
    with cli_runtime() as rt:
        try:
            rt.tokens.revoke(token_id, rt.now())
        except (LookupError, ValueError) as e:
            bad_input(str(e))
    console.print(f"token {token_id} revoked")


@store_app.command("dump")
def store_dump(
    ctx: typer.Context,
    folder: str = typer.Argument(..., help="Where to write it (mongodump layout)."),
) -> None:
    """Write every collection as <folder>/<db>/<collection>.bson and .metadata.json."""
    from crawlsched.store.dump import dump_database

    where = invocation(ctx).writes(folder, "FOLDER")
    with cli_runtime() as rt:
        written = dump_database(rt.db, where / rt.settings.mongo_db)
    total = sum(written.values())
    console.print(f"{total} documents in {len(written)} collections written to {folder}")


@store_app.command("load")
def store_load(
    ctx: typer.Context,
    folder: str = typer.Argument(..., help="A mongodump folder, or a standalone data dir."),
    drop: bool = typer.Option(False, "--drop", help="Replace collections that hold documents."),
) -> None:
    """Load a dump (mongodump's, or a standalone data directory's `current`) into the store."""
    from crawlsched.store.dump import database_folder, load_dump

    where = invocation(ctx).reads_folder(folder, "FOLDER")
    if not where.is_dir():
        bad_input(f"FOLDER: no folder {folder}")
    # A running server keeps its own API tokens: the ones its clients (and this command line,
    # through api.json) hold would all stop working until a restart.
    keep = (TOKENS_COLLECTION,) if in_server() else ()
    with cli_runtime() as rt:
        source = where / "current" if (where / "current").is_dir() else where
        again = "Load it again with --drop: it replaces the collections, whatever was written."
        try:
            with unanswered_writes("a write of the load", again):
                database = database_folder(source, rt.settings.mongo_db)
                loaded = load_dump(rt.db, database, drop, keep=keep)
                rt.create_indexes()
        except (FileNotFoundError, ValueError) as e:
            bad_input(str(e))
    console.print(f"{sum(loaded.values())} documents loaded into {len(loaded)} collections")
    if keep and (database / f"{TOKENS_COLLECTION}.bson").exists():
        console.print("the server's API tokens were kept: the dump's tokens were not loaded")

"""The command line through a running API: a standalone server found in the data directory,
or the server named by CRAWLSCHED_API_URL and CRAWLSCHED_API_TOKEN.

The command runs on the server (`POST /v1/cli`); what it printed and its exit code come back
unchanged. Files move with it: a file a command reads (`jobs import FILE`, `--reference`,
`--secret-file`, or the secret of `--secret-env`, read here) is sent along, and a file it
writes (`--rejects`) is written here afterwards; the folder of `store load` is sent as an
archive, and the one `store dump` writes comes back as one. The server runs the command for a
remote caller (`crawlsched.invocation`): it never reads or writes its own paths for it.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from crawlsched.commands import LOCAL_ONLY, command_path, needed_role
from crawlsched.invocation import UPLOAD_PREFIX, pack_folder, unpack_folder
from crawlsched.settings import Settings, load_settings_or_exit
from crawlsched.standalone.datadir import read_api

# Options whose value is a file the command reads, or writes.
READ_OPTIONS = ("--reference", "--secret-file")
WRITE_OPTIONS = ("--rejects",)
# Options of `jobs import` that take a value (so the file is the other word).
IMPORT_VALUED = ("--kind", "--rejects")
TIMEOUT_S = 600.0
# Commands that change nothing in the store, although the API asks an admin token for them,
# and those that do not use the store at all.
STORE_UNCHANGED = {("accounts", "keygen"), ("store", "dump"), ("tokens", "list")}
NO_STORE = {("accounts", "keygen"), ("drivers",)}


@dataclass
class Target:
    url: str
    token: str
    source: str  # where the address came from, for error messages


@dataclass
class Prepared:
    argv: list[str]
    uploads: dict[str, str] = field(default_factory=dict)
    downloads: dict[str, Path] = field(default_factory=dict)
    folders: set[str] = field(default_factory=set)  # downloads that are folders


def _pid_alive(pid: object) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def target_for(argv: list[str], settings: Settings) -> Target | None:
    """Where this command should run: a server, or here (None)."""
    if not argv or any(a in ("--help", "-h", "--version") for a in argv):
        return None
    path = command_path(argv)
    if not path or path[0] in LOCAL_ONLY:
        return None
    if settings.api_url:
        token = settings.api_token.get_secret_value() if settings.api_token else ""
        return Target(settings.api_url.rstrip("/"), token, "CRAWLSCHED_API_URL")
    if not settings.mongo_url.startswith("mongomock://"):
        return None  # a real MongoDB: read it directly
    found = read_api(settings.data_dir)
    if found and _pid_alive(found.get("pid")):
        return Target(str(found["url"]), str(found["token"]), str(settings.data_dir))
    if (settings.data_dir / "current").exists():
        # Its data is there, but only a running server holds it: a command here would act on
        # an empty embedded store and its changes would vanish.
        raise SystemExit(
            _fail(
                f"no crawlsched standalone server is running for the data in "
                f"{settings.data_dir}: start it with `crawlsched standalone` (or set "
                "CRAWLSCHED_MONGO_URL to use a MongoDB server)",
                1,
            )
        )
    # No server and no MongoDB: the command would run on an embedded store of its own, which
    # ends with it. A change there would be reported and lost; a read finds nothing.
    if _is_command(argv):
        where = (
            f"no crawlsched standalone server runs for {settings.data_dir} and "
            "CRAWLSCHED_MONGO_URL names no MongoDB server"
        )
        if needed_role(argv) != "read" and path not in STORE_UNCHANGED:
            raise SystemExit(
                _fail(
                    f"`crawlsched {' '.join(path)}` would change a store that vanishes when it "
                    f"ends ({where}): start `crawlsched standalone` to keep data in "
                    f"{settings.data_dir}, or set CRAWLSCHED_MONGO_URL=mongodb://…",
                    1,
                )
            )
        if path not in NO_STORE:
            print(f"note: the store is empty: {where}", file=sys.stderr)
    return None


def _is_command(argv: list[str]) -> bool:
    """Whether the words name a command (not a group, not a typo: typer says what is wrong)."""
    import typer

    from crawlsched.cli import app

    command = typer.main.get_command(app)
    for word in argv:
        group = getattr(command, "commands", None)  # a group; typer vendors its own click
        if group is None or word.startswith("-"):
            break
        command = group.get(word)
    return command is not None and not hasattr(command, "commands")


def _option_value(argv: list[str], i: int) -> tuple[str, int] | None:
    """The value of the option at argv[i] (`--opt value` or `--opt=value`) and its index."""
    arg = argv[i]
    if "=" in arg:
        return arg.split("=", 1)[1], i
    if i + 1 < len(argv):
        return argv[i + 1], i + 1
    return None


def _replace(argv: list[str], i: int, value: str) -> None:
    if "=" in argv[i] and argv[i].startswith("--"):
        argv[i] = f"{argv[i].split('=', 1)[0]}={value}"
    else:
        argv[i] = value


def prepare(argv: list[str]) -> Prepared:
    """The arguments to send, with local files turned into uploads and downloads."""
    out = Prepared(list(argv))
    args = out.argv
    path = command_path(args)
    i = 0
    while i < len(args):
        name = args[i].split("=", 1)[0]
        if name in READ_OPTIONS or name in WRITE_OPTIONS or name == "--secret-env":
            found = _option_value(args, i)
            if found is None:
                break  # the server says what is missing
            value, at = found
            key = f"{name.lstrip('-')}-{i}{Path(value).suffix}"
            if name in READ_OPTIONS:
                out.uploads[key] = _read(Path(value))
            elif name in WRITE_OPTIONS:
                out.downloads[key] = Path(value)
            else:  # --secret-env: read the variable here, send it as a file
                out.uploads[key] = os.environ.get(value, "")
                args[i] = "--secret-file" if at != i else f"--secret-file={UPLOAD_PREFIX}{key}"
            _replace(args, at, f"{UPLOAD_PREFIX}{key}")
            i = at + 1
            continue
        i += 1
    if path == ("jobs", "import"):
        _import_file(out)
    if (
        path == ("accounts", "add")
        and not any(a.split("=", 1)[0] == "--secret-file" for a in args)
        and sys.stdin.isatty()
    ):
        import typer

        out.uploads["prompted"] = typer.prompt("secret", hide_input=True, confirmation_prompt=True)
        args += ["--secret-file", f"{UPLOAD_PREFIX}prompted"]
    if path in (("store", "dump"), ("store", "load")):
        _store_folder(out, path[1])
    return out


def _import_file(out: Prepared) -> None:
    args = out.argv
    i = 2
    while i < len(args):
        arg = args[i]
        if arg in IMPORT_VALUED:
            i += 2
            continue
        if not arg.startswith("-") and not arg.startswith(UPLOAD_PREFIX):
            key = f"import{Path(arg).suffix}"
            out.uploads[key] = _read(Path(arg))
            args[i] = f"{UPLOAD_PREFIX}{key}"
            return
        i += 1


def _store_folder(out: Prepared, verb: str) -> None:
    """`store dump DIR` gets its dump back as an archive; `store load DIR` sends one (of
    DIR/current for a standalone data directory: never the rest of it)."""
    args = out.argv
    for j in range(2, len(args)):
        if args[j].startswith("-") or args[j].startswith(UPLOAD_PREFIX):
            continue
        folder = Path(args[j])
        if verb == "dump":
            out.downloads["dump"] = folder
            out.folders.add("dump")
        else:
            source = folder / "current" if (folder / "current").is_dir() else folder
            if not source.is_dir():
                raise SystemExit(_fail(f"no folder {folder}", 2))
            out.uploads["load"] = pack_folder(source)
        args[j] = f"{UPLOAD_PREFIX}{verb}"
        return


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError as e:
        raise SystemExit(_fail(f"cannot read {path}: {e.strerror or e}", 2)) from None


def _fail(message: str, code: int) -> int:
    print(f"error: {message}", file=sys.stderr)
    return code


def run(target: Target, argv: list[str]) -> int:
    """Run the command on the server; print what it printed; its exit code."""
    prepared = prepare(argv)
    # No token: no header (an empty one is not a valid header value, and the server's 401
    # says what is missing); a token pasted with a line break around it still works.
    token = target.token.strip()
    try:
        response = httpx.post(
            f"{target.url}/v1/cli",
            json={
                "argv": prepared.argv,
                "uploads": prepared.uploads,
                "downloads": list(prepared.downloads),
            },
            headers={"Authorization": f"Bearer {token}"} if token else {},
            timeout=TIMEOUT_S,
        )
    except httpx.LocalProtocolError:
        # The request could not even be written: with a usable address, the token is what
        # h11 refused (its message would print the token: it is not repeated here).
        return _fail(
            f"no request could be sent to {target.url} ({target.source}): the API token "
            "is not a valid header value (one line of printable characters)",
            2,
        )
    except httpx.HTTPError as e:
        return _fail(
            f"the crawlsched API at {target.url} (from {target.source}) cannot be reached: "
            f"{type(e).__name__}; is the server running?",
            1,
        )
    if response.status_code != 200:
        try:
            detail = response.json().get("detail", response.text)
        except ValueError:
            detail = response.text[:200]
        code = 2 if response.status_code in (400, 404, 422) else 1
        if response.status_code == 401 and not token:
            detail = f"{detail}: set CRAWLSCHED_API_TOKEN"
        return _fail(f"{detail} (the API at {target.url} answered {response.status_code})", code)
    result = response.json()
    sys.stdout.write(result["stdout"])
    sys.stderr.write(result["stderr"])
    for key, local in prepared.downloads.items():
        if key not in result["downloads"]:
            continue
        if key in prepared.folders:
            unpack_folder(result["downloads"][key], local)
        else:
            local.write_text(result["downloads"][key])
    return int(result["exit_code"])


def main_argv(argv: list[str]) -> int | None:
    """Run through an API when one applies; None: run here."""
    settings = load_settings_or_exit()
    target = target_for(argv, settings)
    if target is None:
        return None
    return run(target, argv)

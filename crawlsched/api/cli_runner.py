"""Run a `crawlsched` command inside the API's process, for a command line in another terminal.

This is how every CLI command works against a standalone server without a second
implementation: the remote CLI sends its arguments, the server runs the very same command on
its own runtime and sends back what it printed and its exit code. The output is therefore the
same whether the CLI reads MongoDB directly or goes through the API.

Commands that only read need a read token; every other command needs an admin token.
Commands that start processes of their own (demo, standalone, clock, api serve) are refused.
Files the command reads or writes travel with the request (`uploads`, `downloads`).
"""

from __future__ import annotations

import re
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

from crawlsched.logs import get_logger

log = get_logger(__name__)

READ_COMMANDS = {
    ("runs",),
    ("run", "status"),
    ("run", "children"),
    ("run", "history"),
    ("run", "resources"),
    ("schedules", "list"),
    ("schedules", "show"),
    ("schedules", "next"),
    ("schedules", "missed"),
    ("jobs", "problems"),
    ("jobs", "summary"),
    ("accounts", "list"),
    ("nodes", "list"),
    ("pools",),
    ("activity",),
    ("stats",),
    ("results",),
    ("doctor",),
    ("drivers",),
}
LOCAL_ONLY = {"demo", "standalone", "clock", "api"}
UPLOAD_PREFIX = "@upload:"
MAX_ARGS = 200
MAX_FILE_BYTES = 64 * 1024 * 1024

# Commands print through module-level consoles onto sys.stdout: one command at a time.
_running = threading.Lock()


@dataclass
class Outcome:
    exit_code: int
    stdout: str
    stderr: str
    downloads: dict[str, str] = field(default_factory=dict)


def command_path(argv: list[str]) -> tuple[str, ...]:
    """The command's names (`("run", "status")`), from the words before the first option."""
    words = []
    for arg in argv:
        if arg.startswith("-"):
            break
        words.append(arg)
        if len(words) == 2:
            break
    return tuple(words)


def needed_role(argv: list[str]) -> str:
    path = command_path(argv)
    return "read" if path[:1] in READ_COMMANDS or path[:2] in READ_COMMANDS else "admin"


def refusal(argv: list[str]) -> str | None:
    """Why this command cannot run through the API, or None."""
    if len(argv) > MAX_ARGS:
        return f"at most {MAX_ARGS} arguments"
    path = command_path(argv)
    if not path:
        return "no command given"
    if path[0] in LOCAL_ONLY:
        return f"`crawlsched {path[0]}` starts processes of its own: run it on the server"
    return None


def _safe_suffix(name: str) -> str:
    suffix = Path(name).suffix
    return suffix if re.fullmatch(r"\.[A-Za-z0-9]{1,10}", suffix) else ""


def run_command(argv: list[str], uploads: dict[str, str], download_names: list[str]) -> Outcome:
    """Run `crawlsched ARGV` here; `@upload:NAME` arguments become files holding `uploads[NAME]`,
    and the files named in `download_names` (also `@upload:NAME`) are sent back after."""
    from typer.testing import CliRunner

    from crawlsched.cli import run

    with tempfile.TemporaryDirectory(prefix="crawlsched-cli-") as folder:
        paths: dict[str, Path] = {}
        for name in {*uploads, *download_names}:
            # The name's suffix is kept: a command may read the format from it (.csv, .jsonl).
            path = Path(folder) / f"file-{len(paths)}{_safe_suffix(name)}"
            if name in uploads:
                path.write_text(uploads[name])
            paths[name] = path
        args = [
            str(paths[a.removeprefix(UPLOAD_PREFIX)])
            if a.startswith(UPLOAD_PREFIX) and a.removeprefix(UPLOAD_PREFIX) in paths
            else a
            for a in argv
        ]
        with _running, CliRunner().isolation() as (stdout, stderr, _):
            try:
                code = run(args)
            except Exception as e:  # a bug in a command: reported, the server goes on
                log.error("cli_command_failed", argv=args[:3], exc_info=e)
                print(f"error: internal error in this command: {type(e).__name__}", file=sys.stderr)
                code = 1
            sys.stdout.flush()
            sys.stderr.flush()
            out, err = stdout.getvalue().decode(), stderr.getvalue().decode()
        downloads = {n: paths[n].read_text() for n in download_names if paths[n].exists()}
    return Outcome(code, out, err, downloads)

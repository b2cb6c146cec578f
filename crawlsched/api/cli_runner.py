"""Run a `crawlsched` command inside the API's process, for a command line in another terminal.

This is how every CLI command works against a standalone server without a second
implementation: the remote CLI sends its arguments, the server runs the very same command on
its own runtime and sends back what it printed and its exit code. The output is therefore the
same whether the CLI reads MongoDB directly or goes through the API.

The API does not know the command line: the process that serves it hands `create_app` a
`CommandRunner` (the command line's `run`). The command runs with a remote `Invocation`: files
it reads come with the request (`uploads`), files and folders it writes go back
(`downloads`), and anything else that would reach the server's disk, environment or network
is refused (`RemoteRefused`, answered 400).
"""

from __future__ import annotations

import re
import sys
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from crawlsched.invocation import Invocation, RemoteRefused, pack_folder
from crawlsched.logs import get_logger

log = get_logger(__name__)

CommandRunner = Callable[[list[str], Invocation], int]

# Commands print through module-level consoles onto sys.stdout: one command at a time.
_running = threading.Lock()


@dataclass
class Outcome:
    exit_code: int
    stdout: str
    stderr: str
    downloads: dict[str, str] = field(default_factory=dict)
    refused: str | None = None  # why the command was refused (it changed nothing)


def _safe_suffix(name: str) -> str:
    suffix = Path(name).suffix
    return suffix if re.fullmatch(r"\.[A-Za-z0-9]{1,10}", suffix) else ""


def run_command(
    run: CommandRunner, argv: list[str], uploads: dict[str, str], download_names: list[str]
) -> Outcome:
    """Run `crawlsched ARGV` here for a remote caller: `@upload:NAME` arguments are the files
    holding `uploads[NAME]`, and the files (or folders) named in `download_names` are sent back
    after."""
    from typer.testing import CliRunner

    with tempfile.TemporaryDirectory(prefix="crawlsched-cli-") as folder:
        paths: dict[str, Path] = {}
        for name in {*uploads, *download_names}:
            # The name's suffix is kept: a command may read the format from it (.csv, .jsonl).
            path = Path(folder) / f"file-{len(paths)}{_safe_suffix(name)}"
            if name in uploads:
                path.write_text(uploads[name])
            paths[name] = path
        invocation = Invocation(remote=True, files=MappingProxyType(paths))
        with _running, CliRunner().isolation() as (stdout, stderr, _):
            try:
                code = run(argv, invocation)
            except RemoteRefused as e:
                return Outcome(2, "", "", refused=str(e))
            except Exception as e:  # a bug in a command: reported, the server goes on
                log.error("cli_command_failed", argv=argv[:3], exc_info=e)
                print(f"error: internal error in this command: {type(e).__name__}", file=sys.stderr)
                code = 1
            sys.stdout.flush()
            sys.stderr.flush()
            out, err = stdout.getvalue().decode(), stderr.getvalue().decode()
        downloads = {n: _download(paths[n]) for n in download_names if paths[n].exists()}
    return Outcome(code, out, err, downloads)


def _download(path: Path) -> str:
    return pack_folder(path) if path.is_dir() else path.read_text()

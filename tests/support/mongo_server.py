"""A MongoDB wire-protocol server that several OS processes can share, for tests.

There is no mongod on these machines (DESIGN.md §3), and mongomock lives inside one process, so
tests that run real worker processes talk to mongoeco's in-memory engine served over the wire.
mongoeco needs Python 3.13 while the project runs on 3.11, so it gets its own venv under
``<repo>/.cache`` and runs as a subprocess (``mongoeco_serve.py``).

    python -m tests.support.mongo_server --prepare   # build the venv ahead of the first test
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import IO

import pymongo
from pymongo.errors import PyMongoError

REPO_ROOT = Path(__file__).resolve().parents[2]
SERVE_SCRIPT = Path(__file__).with_name("mongoeco_serve.py")
MONGOECO_VERSION = "4.11.0"
# The [wire] extra brings pymongo/bson into the server's venv; without them the server accepts
# connections and silently closes them, which looks like a network problem, not a missing package.
MONGOECO_REQUIREMENT = f"mongoeco[wire]=={MONGOECO_VERSION}"
PYTHON_ENV_VAR = "CRAWLSCHED_MONGOECO_PYTHON"

# Every database a test asks for starts with this, so a session can clean up after itself on a
# shared real mongod without touching another session's (or anyone else's) data.
SESSION_DB_PREFIX = f"cst_{uuid.uuid4().hex[:6]}_"

_CHECK_VENV = (
    "import importlib.metadata, mongoeco.wire.proxy, pymongo, bson; "
    "print(importlib.metadata.version('mongoeco'))"
)


def find_python313() -> str | None:
    """Return the real path of a Python >= 3.13 interpreter, or None.

    Every candidate is run, not just looked up: on these machines ``python3.13`` on PATH is a
    pyenv shim that exits with "command not found" unless 3.13 is the selected version.
    """
    candidates = [os.environ.get(PYTHON_ENV_VAR, "")]
    if pyenv := shutil.which("pyenv"):
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            prefix = subprocess.run(
                [pyenv, "prefix", "3.13"], capture_output=True, text=True, timeout=10, check=True
            ).stdout.strip()
            candidates.append(str(Path(prefix.splitlines()[0]) / "bin" / "python"))
    candidates.append(shutil.which("python3.13") or "")
    for candidate in filter(None, candidates):
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            result = subprocess.run(
                [
                    candidate,
                    "-c",
                    "import sys; print(sys.executable); sys.exit(sys.version_info < (3, 13))",
                ],
                check=False,
                capture_output=True,
                text=True,
                timeout=15,
            )
            if result.returncode == 0 and result.stdout.strip():
                return result.stdout.strip()
    return None


def _venv_is_ready(python: Path) -> bool:
    if not python.exists():
        return False
    try:
        result = subprocess.run(
            [str(python), "-c", _CHECK_VENV],
            check=False,
            capture_output=True,
            text=True,
            timeout=60,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    # Comparing the version makes a bump of MONGOECO_VERSION rebuild the venv by itself.
    return result.returncode == 0 and result.stdout.strip() == MONGOECO_VERSION


@contextlib.contextmanager
def _file_lock(path: Path, timeout: float) -> Iterator[None]:
    # Polling a non-blocking flock keeps the wait bounded: a stuck pip in another process must
    # end in an error here, not in a test run that hangs until pytest-timeout.
    with path.open("a") as handle:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"timed out after {timeout:.0f}s waiting for {path}"
                    ) from None
                time.sleep(0.2)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _run_or_raise(args: list[str], what: str, timeout: float) -> None:
    try:
        result = subprocess.run(args, check=False, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"{what} did not finish within {timeout:.0f}s") from None
    if result.returncode != 0:
        output = (result.stdout + result.stderr).strip()[-3000:]
        raise RuntimeError(f"{what} failed (exit {result.returncode}): {output}")


def ensure_mongoeco_venv(root: Path) -> Path:
    """Make ``<root>/.cache/mongoeco-venv`` hold mongoeco, and return its Python interpreter.

    Cheap when the venv is already good (one interpreter start). Safe to call from parallel
    processes: building happens under a file lock, and whoever waited re-checks before building.
    """
    venv = root / ".cache" / "mongoeco-venv"
    python = venv / "bin" / "python"
    if _venv_is_ready(python):
        return python
    venv.parent.mkdir(parents=True, exist_ok=True)
    with _file_lock(venv.parent / "mongoeco-venv.lock", timeout=900):
        if _venv_is_ready(python):
            return python
        base = find_python313()
        if base is None:
            raise RuntimeError(
                "mongoeco needs Python >= 3.13 and none was found: set "
                f"{PYTHON_ENV_VAR}, or install it with pyenv (`pyenv prefix 3.13` must work)"
            )
        # Whatever is there failed the check (an interrupted install, an old version): start over.
        shutil.rmtree(venv, ignore_errors=True)
        _run_or_raise([base, "-m", "venv", str(venv)], f"creating {venv} with {base}", 300)
        _run_or_raise(
            [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check",
             MONGOECO_REQUIREMENT],
            f"pip install {MONGOECO_REQUIREMENT}",
            900,
        )  # fmt: skip
        if not _venv_is_ready(python):
            raise RuntimeError(f"{venv} was built but `{_CHECK_VENV}` still fails in it")
    return python


def ping(url: str, timeout: float = 2.0) -> None:
    """Raise a PyMongoError unless a server answers ``ping`` at ``url`` within ``timeout``."""
    ms = max(int(timeout * 1000), 100)
    with pymongo.MongoClient(
        url, serverSelectionTimeoutMS=ms, connectTimeoutMS=ms, socketTimeoutMS=ms
    ) as client:
        client.admin.command("ping")


def fresh_database_name(hint: str = "") -> str:
    """A database name no other test in any session uses; ``hint`` (a test name) aids debugging."""
    # MongoDB forbids /\. "$*<>:|? in database names and limits them to 63 bytes.
    slug = re.sub(r"[^A-Za-z0-9_]+", "_", hint).strip("_")[:32]
    return f"{SESSION_DB_PREFIX}{slug}_{uuid.uuid4().hex[:8]}"


def drop_session_databases(url: str) -> None:
    """Drop the databases this session created (for a long-lived real mongod)."""
    with pymongo.MongoClient(url, serverSelectionTimeoutMS=5000) as client:
        for name in client.list_database_names():
            if name.startswith(SESSION_DB_PREFIX):
                client.drop_database(name)


class MongoecoServer:
    """A mongoeco wire server in a subprocess on a free loopback port.

    ``with MongoecoServer() as server: pymongo.MongoClient(server.url)``. The data lives in the
    server's memory and is gone when it stops.
    """

    def __init__(
        self,
        python: str | Path | None = None,
        *,
        host: str = "127.0.0.1",
        start_timeout: float = 30.0,
    ) -> None:
        self._python = python
        self.host = host
        self.start_timeout = start_timeout
        self.port: int | None = None
        self.process: subprocess.Popen[bytes] | None = None
        self.stderr_text = ""
        self._stdout: IO[bytes] | None = None
        self._stderr: IO[bytes] | None = None

    @property
    def url(self) -> str:
        if self.port is None:
            raise RuntimeError("MongoecoServer is not running")
        return f"mongodb://{self.host}:{self.port}/?directConnection=true"

    def start(self) -> MongoecoServer:
        # Building the venv is not part of the start timeout: cold, it takes much longer.
        python = self._python or ensure_mongoeco_venv(REPO_ROOT)
        # Output goes to files, not pipes: a pipe nobody reads fills up and freezes the server.
        self._stdout = tempfile.NamedTemporaryFile(prefix="mongoeco-out-")  # noqa: SIM115
        self._stderr = tempfile.NamedTemporaryFile(prefix="mongoeco-err-")  # noqa: SIM115
        self.process = subprocess.Popen(
            [str(python), str(SERVE_SCRIPT), "--host", self.host, "--port", "0"],
            stdin=subprocess.PIPE,  # its EOF tells the server we are gone (see mongoeco_serve)
            stdout=self._stdout,
            stderr=self._stderr,
            # Own session: a Ctrl-C at the terminal reaches pytest, whose teardown stops the
            # server in order, instead of killing the server under running tests.
            start_new_session=True,
        )
        deadline = time.monotonic() + self.start_timeout
        try:
            self.port = self._wait_for_ready_line(deadline)
            self._wait_for_ping(deadline)
        except RuntimeError as exc:
            self.stop()
            raise RuntimeError(
                f"mongoeco server failed to start: {exc}; exit code "
                f"{self.process.returncode}; stderr:\n{self.stderr_text.strip()[-3000:]}"
            ) from None
        return self

    def _read(self, handle: IO[bytes] | None) -> str:
        # pread leaves the file offset alone; the child shares that offset and keeps writing.
        if handle is None:
            return ""
        return os.pread(handle.fileno(), 1 << 20, 0).decode(errors="replace")

    def _wait_for_ready_line(self, deadline: float) -> int:
        assert self.process is not None
        while time.monotonic() < deadline:
            for line in self._read(self._stdout).splitlines():
                if line.startswith("ready "):
                    return int(line.split()[1])
            if self.process.poll() is not None:
                raise RuntimeError("the server process exited before it was ready")
            time.sleep(0.05)
        raise RuntimeError(f"no ready line within {self.start_timeout:.0f}s")

    def _wait_for_ping(self, deadline: float) -> None:
        assert self.process is not None
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError("the server process exited before answering ping")
            try:
                ping(self.url, timeout=min(2.0, max(deadline - time.monotonic(), 0.1)))
                return
            except PyMongoError as exc:
                last_error = exc
                time.sleep(0.1)
        raise RuntimeError(f"ping did not succeed within {self.start_timeout:.0f}s: {last_error}")

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 10 s. Idempotent."""
        process = self.process
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
        if process is not None and process.stdin is not None:
            with contextlib.suppress(OSError):
                process.stdin.close()
        if self._stderr is not None:
            self.stderr_text = self._read(self._stderr)
        for handle in (self._stdout, self._stderr):
            if handle is not None:
                handle.close()
        self._stdout = self._stderr = None
        self.port = None

    def __enter__(self) -> MongoecoServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description="mongoeco test-server helpers")
    parser.add_argument(
        "--prepare", action="store_true", help="build the mongoeco venv now (idempotent)"
    )
    args = parser.parse_args()
    if not args.prepare:
        parser.print_help()
        return 2
    started = time.monotonic()
    try:
        python = ensure_mongoeco_venv(REPO_ROOT)
    except RuntimeError as exc:
        print(f"mongoeco venv: NOT ready: {exc}", file=sys.stderr)
        return 1
    print(f"mongoeco venv: ready at {python} ({time.monotonic() - started:.1f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

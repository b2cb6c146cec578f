"""Which backend a command works through, decided once, at the edge:

- CRAWLSCHED_API_URL (with CRAWLSCHED_API_TOKEN): that API;
- CRAWLSCHED_MONGO_URL naming a MongoDB server: that store, here;
- a standalone server running for the data directory (`api.json`): its API;
- data in the data directory but no server: refused (a command here would act on an empty
  store and its changes would vanish);
- nothing at all: an embedded store of the command's own, which ends with it (a change is
  refused, a read says the store is empty: `LocalBackend.vanishing`).

A command that goes through a server is decided from the four variables that say so, before
the whole settings are read: it uses none of the others, and is spared their cost at start.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from crawlsched.cli.backend import Backend, CommandFailed

if TYPE_CHECKING:
    from crawlsched.settings import Settings

_KEY = "crawlsched.backend"
PREFIX = "CRAWLSCHED_"


def backend(ctx: typer.Context) -> Backend:
    """This command's backend (made on its first use, then kept for the command).

    The root context's `obj` may hand one in (`backend`), or say the command is the whole
    process (`own_process`, `crawlsched.cli.run`): only then are a server and a vanishing
    store looked for. A command run inside another process (a test's) works on its settings'
    store, which lives as long as that process."""
    root = ctx.find_root()
    if _KEY not in root.meta:
        found = root.obj if isinstance(root.obj, dict) else {}
        if found.get("backend") is not None:
            root.meta[_KEY] = found["backend"]
        elif found.get("own_process"):
            root.meta[_KEY] = _server_from_environment() or backend_for(
                found.get("settings") or _settings(), ctx.command_path
            )
        else:
            root.meta[_KEY] = _local(found.get("settings") or _settings(), ctx.command_path)
    return root.meta[_KEY]


def _settings() -> Settings:
    from crawlsched.settings import load_settings_or_exit

    return load_settings_or_exit()


def _server_from_environment() -> Backend | None:
    """A server the environment names, or one running for the data directory, read from the
    variables alone; None when the store is to be used here (the settings decide the rest)."""
    from crawlsched.paths import default_data_dir
    from crawlsched.standalone.address import running_server

    env = {k.upper(): v for k, v in os.environ.items() if k.upper().startswith(PREFIX)}
    if url := env.get(f"{PREFIX}API_URL"):
        return _remote(url, env.get(f"{PREFIX}API_TOKEN", ""), "CRAWLSCHED_API_URL")
    if not env.get(f"{PREFIX}MONGO_URL", "mongomock://").startswith("mongomock://"):
        return None
    given = env.get(f"{PREFIX}DATA_DIR")
    data_dir = Path(given) if given else default_data_dir()
    found = running_server(data_dir)
    if found:
        return _remote(str(found.get("url")), str(found.get("token")), str(data_dir))
    return None


def running_server_of(settings: Settings) -> dict[str, Any] | None:
    """The standalone server running for the data directory, if any."""
    from crawlsched.standalone.address import running_server

    return running_server(settings.data_dir)


def backend_for(settings: Settings, command: str) -> Backend:
    if settings.api_url:
        token = settings.api_token.get_secret_value() if settings.api_token else ""
        return _remote(settings.api_url, token, "CRAWLSCHED_API_URL")
    if not settings.mongo_url.startswith("mongomock://"):
        return _local(settings, command)
    found = running_server_of(settings)
    if found:
        return _remote(str(found.get("url")), str(found.get("token")), str(settings.data_dir))
    if (settings.data_dir / "current").exists():
        raise CommandFailed(
            f"no crawlsched standalone server is running for the data in {settings.data_dir}: "
            "start it with `crawlsched standalone` (or set CRAWLSCHED_MONGO_URL to use a "
            "MongoDB server)",
            1,
        )
    vanishing = (
        f"no crawlsched standalone server runs for {settings.data_dir} and "
        "CRAWLSCHED_MONGO_URL names no MongoDB server"
    )
    return _local(settings, command, vanishing)


def _remote(url: str, token: str, source: str) -> Backend:
    from crawlsched.cli.remote import RemoteBackend

    return RemoteBackend(url, token, source)


def _local(settings: Settings, command: str, vanishing: str | None = None) -> Any:
    from crawlsched.cli.local import LocalBackend

    return LocalBackend(settings, command, vanishing)

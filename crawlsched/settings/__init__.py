"""One frozen Settings object, parsed at the edges (CLI, broker setup) from CRAWLSCHED_* env.

The settings are declared in groups, one module each (`connections`, `runs`, `crawling`,
`operations`, `serving`, `proxies`); `Settings` is all of them, read from the environment.
"""

from __future__ import annotations

import os  # noqa: F401  (tests patch `settings.os.getpid`, which `broker_urls` reads)
import re
import sys

from pydantic import ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict, SettingsError

from crawlsched.settings.connections import ConnectionSettings
from crawlsched.settings.crawling import CrawlSettings
from crawlsched.settings.operations import OperationSettings
from crawlsched.settings.proxies import ProxySettings
from crawlsched.settings.runs import RunSettings
from crawlsched.settings.serving import ServingSettings
from crawlsched.settings.values import (
    LOG_LEVELS,
    MAX_RETAIN_S,
    SILENCED_HOSTS,
    default_data_dir,
    split_address,
    split_broker_urls,
    spread_nodes,
)

__all__ = [
    "LOG_LEVELS",
    "MAX_RETAIN_S",
    "SILENCED_HOSTS",
    "Settings",
    "default_data_dir",
    "load_settings_or_exit",
    "settings_error",
    "split_address",
    "split_broker_urls",
    "spread_nodes",
]


# The groups in reverse: pydantic lists the fields of the last base first.
class Settings(
    ProxySettings,
    ServingSettings,
    OperationSettings,
    CrawlSettings,
    RunSettings,
    ConnectionSettings,
    BaseSettings,
):
    model_config = SettingsConfigDict(env_prefix="CRAWLSCHED_", frozen=True, extra="ignore")


def settings_error(error: ValidationError | SettingsError) -> str:
    """One line naming the first bad setting by its environment variable, and why."""
    if isinstance(error, SettingsError):
        found = re.search(r'field "(\w+)"', str(error))
        field = found.group(1).upper() if found else "*"
        return f"invalid setting CRAWLSCHED_{field}: not valid JSON (lists are written as JSON)"
    first = error.errors(include_url=False, include_input=False)[0]
    field = str(first["loc"][0]) if first["loc"] else "settings"
    more = error.error_count() - 1
    tail = f" (and {more} more)" if more else ""
    message = first["msg"].removeprefix("Value error, ")
    return f"invalid setting CRAWLSCHED_{field.upper()}: {message}{tail}"


def load_settings_or_exit() -> Settings:
    """Settings from the environment, or one line on stderr and exit status 2."""
    try:
        return Settings()
    except (ValidationError, SettingsError) as e:
        print(settings_error(e), file=sys.stderr)
        raise SystemExit(2) from None

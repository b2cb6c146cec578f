"""Drivers by name (the media's `driver_class`), with plug-ins from modules or entry points.

A plug-in module calls `register("name", factory)` when imported; list such modules in
CRAWLSCHED_DRIVER_MODULES, or expose them as `crawlsched.drivers` entry points.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from importlib.metadata import entry_points

from crawlsched.drivers.base import Driver
from crawlsched.errors import UnknownDriver

_factories: dict[str, Callable[[], Driver]] = {}


def register(name: str, factory: Callable[[], Driver]) -> None:
    if not name:
        raise ValueError("a driver needs a name")
    _factories[name] = factory


def load_plugins(modules: Iterable[str] = ()) -> None:
    # Built-ins register themselves on import.
    importlib.import_module("crawlsched.drivers.http")
    importlib.import_module("crawlsched.drivers.noop")
    importlib.import_module("crawlsched.drivers.browser")
    for module in modules:
        importlib.import_module(module)
    for entry in entry_points(group="crawlsched.drivers"):
        register(entry.name, entry.load())


def create(name: str) -> Driver:
    try:
        factory = _factories[name]
    except KeyError:
        raise UnknownDriver(name, sorted(_factories)) from None
    return factory()


def known() -> list[str]:
    return sorted(_factories)

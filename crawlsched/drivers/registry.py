"""Drivers by name (a media's `driver_class`): a table of built-ins, plus plug-ins.

Nothing registers itself on import. A name is looked up, in this order, in:
1. `BUILT_IN`: name -> "module:Class", imported only when a batch needs that driver;
2. the `crawlsched.drivers` entry points of installed packages (name = "module:Class");
3. the `DRIVERS` table (name -> class) of each module listed in CRAWLSCHED_DRIVER_MODULES.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Iterable
from importlib.metadata import entry_points
from typing import Any

from crawlsched.errors import UnknownDriver

BUILT_IN: dict[str, str] = {
    "http": "crawlsched.drivers.http:HttpPageDriver",
    "browser": "crawlsched.drivers.browser:BrowserPageDriver",
    "noop": "crawlsched.drivers.noop:NoopDriver",
    "website": "crawlsched.drivers.website:WebsiteDriver",
    "demo_social": "crawlsched.drivers.social:DemoSocialDriver",
}
ENTRY_POINT_GROUP = "crawlsched.drivers"

_lock = threading.Lock()
_specs: dict[str, str] = {}  # name -> "module:Class" (built-ins and entry points)
_classes: dict[str, type] = {}  # name -> class (loaded, or from a module's DRIVERS table)


def load_plugins(modules: Iterable[str] = ()) -> None:
    """Learn the names of every driver: built-ins, entry points, and the modules' tables."""
    with _lock:
        _specs.update(BUILT_IN)
        for entry in entry_points(group=ENTRY_POINT_GROUP):
            _specs[entry.name] = entry.value
        for module_name in modules:
            table = getattr(importlib.import_module(module_name), "DRIVERS", None)
            if not isinstance(table, dict):
                raise ValueError(f"driver module {module_name!r} has no DRIVERS table")
            for name, cls in table.items():
                _classes[str(name)] = cls


def driver_class(name: str) -> type:
    with _lock:
        if not _specs:
            _specs.update(BUILT_IN)
        if name in _classes:
            return _classes[name]
        spec = _specs.get(name)
        if spec is None:
            raise UnknownDriver(name, sorted({*_specs, *_classes}))
        module_name, _, attr = spec.partition(":")
        cls = getattr(importlib.import_module(module_name), attr)
        _classes[name] = cls
        return cls


def create(name: str) -> Any:
    return driver_class(name)()


def known() -> list[str]:
    with _lock:
        return sorted({*BUILT_IN, *_specs, *_classes})

"""The package's layers, judged by every import statement in the sources (lazy ones inside
functions too) and, where it matters, by what a fresh interpreter holds after importing:

- the command line and the API do not import each other: `crawlsched.main` composes them;
- no two modules import each other, through any chain;
- the runtime and politeness sit below the flow (and the actors): nothing they import, through
  any chain, is of `crawlsched.flow`;
- the pure decisions (planning, schedule maths, the host and lease rules) load neither
  dramatiq nor pymongo;
- the crawl path's modules stay small: under 400 lines a module, 250 a class."""

from __future__ import annotations

import ast
import graphlib
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "crawlsched"
APART = [("api", "cli"), ("cli", "api")]


def imported_names(source: Path) -> set[str]:
    """Every module a file imports (`from crawlsched import cli` counts as crawlsched.cli)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source.read_text(), str(source))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


@pytest.mark.parametrize(("package", "other"), APART)
def test_no_source_of_one_package_imports_the_other(package, other):
    sources = sorted((PACKAGE / package).rglob("*.py"))
    assert len(sources) >= 8
    crossing = {
        str(source.relative_to(PACKAGE.parent)): sorted(
            n for n in imported_names(source) if n.split(".")[:2] == ["crawlsched", other]
        )
        for source in sources
    }
    assert {k: v for k, v in crossing.items() if v} == {}


@pytest.mark.parametrize(("package", "other"), APART)
def test_importing_every_module_of_one_package_loads_none_of_the_other(package, other):
    code = (
        "import importlib, pkgutil, sys\n"
        f"import crawlsched.{package} as p\n"
        f"for m in pkgutil.walk_packages(p.__path__, 'crawlsched.{package}.'):\n"
        "    importlib.import_module(m.name)\n"
        f"print(sorted(m for m in sys.modules if m.startswith('crawlsched.{other}')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=PACKAGE.parent,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert out.stdout.strip() == "[]"


def test_the_entry_point_composes_both():
    names = imported_names(PACKAGE / "main.py")
    assert "crawlsched.cli" in names and "crawlsched.api" in names


# -- the import graph of the whole package ---------------------------------------------------


def module_files() -> dict[str, Path]:
    """Every module of the package by its dotted name (a package by its `__init__.py`)."""
    files = {}
    for source in PACKAGE.rglob("*.py"):
        parts = source.relative_to(PACKAGE.parent).with_suffix("").parts
        files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = source
    return files


MODULES = module_files()


def imported_modules(name: str) -> set[str]:
    """The package's modules that module `name` imports (`from a.b import c` is `a.b.c` when c
    is a module, else `a.b`; relative imports resolved). The packages it sits in are left
    out: Python runs them first, they are not an import of the module's own."""
    source = MODULES[name]
    here = name if source.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(source.read_text(), str(source))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = here.split(".")[: len(here.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    modules = {nearest_module(imported) for imported in found} - {"", name}
    return {m for m in modules if not name.startswith(f"{m}.")}


def nearest_module(dotted: str) -> str:
    """The package's module a dotted name is (or lies in: a class, a function), else ''."""
    while dotted and dotted not in MODULES:
        dotted = dotted.rpartition(".")[0]
    return dotted


GRAPH = {name: imported_modules(name) for name in MODULES}


def reached(name: str) -> set[str]:
    """Every module importing `name` runs: what it imports, through any chain, and the
    packages each of those sits in."""
    seen, todo = set(), [name]
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        todo.extend(GRAPH[module])
        parent = module.rpartition(".")[0]
        while parent:
            todo.append(parent)
            parent = parent.rpartition(".")[0]
    return seen


def test_the_import_graph_is_read_whole():
    # (a graph read wrong would pass every test below with nothing in it)
    assert len(MODULES) > 250 and sum(map(len, GRAPH.values())) > 1000
    assert "crawlsched.store.hosts" in GRAPH["crawlsched.politeness.pacer"]
    assert "crawlsched.flow.admission" in reached("crawlsched.crawl.loop")


def test_no_modules_import_each_other_through_any_chain():
    try:
        graphlib.TopologicalSorter(GRAPH).prepare()
    except graphlib.CycleError as cycle:
        pytest.fail("import cycle: " + " -> ".join(cycle.args[1]))


@pytest.mark.parametrize("name", ["crawlsched.runtime", "crawlsched.politeness"])
def test_the_runtime_and_politeness_import_nothing_of_the_flow(name):
    below = {m for m in MODULES if m == name or m.startswith(f"{name}.")}
    above = ("crawlsched.flow", "crawlsched.actors")
    reaching = {
        module: sorted(m for m in reached(module) if m.startswith(above)) for module in below
    }
    assert {module: up for module, up in reaching.items() if up} == {}


PURE_PACKAGES = ("crawlsched.planning", "crawlsched.schedules")
PURE_MODULES = (
    "crawlsched.resources.host_rules",
    "crawlsched.resources.host_slices",
    "crawlsched.resources.host_grouping",
    "crawlsched.resources.rules",
)
IMPURE = ("dramatiq", "pymongo", "bson", "mongomock")


def pure_modules() -> list[str]:
    inside = [m for m in MODULES if m.startswith(tuple(f"{p}." for p in PURE_PACKAGES))]
    return sorted([*PURE_PACKAGES, *inside, *PURE_MODULES])


def third_party(name: str) -> set[str]:
    """The top-level names of what module `name` imports from outside the package."""
    source = MODULES[name]
    names = set()
    for node in ast.walk(ast.parse(source.read_text(), str(source))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return names - {"crawlsched"}


def test_the_pure_decisions_import_neither_dramatiq_nor_pymongo_through_any_chain():
    pure = pure_modules()
    assert len(pure) >= 25
    loading = {
        name: sorted({m for m in reached(name) if third_party(m) & set(IMPURE)}) for name in pure
    }
    assert {name: via for name, via in loading.items() if via} == {}


def test_a_fresh_interpreter_importing_the_pure_decisions_holds_no_dramatiq_nor_pymongo():
    code = (
        "import importlib, sys\n"
        f"for name in {pure_modules()!r}:\n"
        "    importlib.import_module(name)\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {IMPURE!r}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=PACKAGE.parent,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert out.stdout.strip() == "[]"


CRAWL_MODULE_LINES = 400
CRAWL_CLASS_LINES = 250


def test_the_crawl_paths_modules_and_classes_stay_small():
    sources = sorted((PACKAGE / "crawl").glob("*.py"))
    assert len(sources) >= 10
    too_long = {}
    for source in sources:
        text = source.read_text()
        name = str(source.relative_to(PACKAGE.parent))
        if (lines := len(text.splitlines())) >= CRAWL_MODULE_LINES:
            too_long[name] = lines
        for node in ast.walk(ast.parse(text, name)):
            lines = getattr(node, "end_lineno", 0) - getattr(node, "lineno", 0) + 1
            if isinstance(node, ast.ClassDef) and lines >= CRAWL_CLASS_LINES:
                too_long[f"{name}::{node.name}"] = lines
    assert too_long == {}

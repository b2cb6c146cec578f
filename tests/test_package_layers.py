"""The command line and the API do not import each other: `crawlsched.main` composes them.

Judged twice: by every import statement in the sources (lazy ones inside functions too), and by
what a fresh interpreter holds after importing every module of one package."""

from __future__ import annotations

import ast
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

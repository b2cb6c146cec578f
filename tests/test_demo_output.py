"""`crawlsched demo` piped, as a newcomer's first command would be in a script or CI log."""

import subprocess
import sys
from pathlib import Path

import pytest

from crawlsched.planning.outcomes import OUTCOME_MEANINGS

CLI = str(Path(sys.executable).parent / "crawlsched")
TITLES = ("Runs", "Planned per category", "Time per stage")


@pytest.fixture(scope="module")
def demo_output() -> str:
    result = subprocess.run([CLI, "demo"], capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout


def test_demo_piped_prints_each_table_once_without_live_frames(demo_output):
    lines = demo_output.splitlines()
    for title in TITLES:
        assert sum(line.strip().startswith(title) for line in lines) == 1, title
    assert "Runs (live)" not in demo_output
    # No frame glued to a title: every table title stands alone on its line.
    assert not any(("┘" in line or "┃" in line) and "Runs" in line for line in lines)
    assert demo_output.endswith("\n")


def test_demo_legend_and_final_line_account_for_every_outcome(demo_output):
    final = next(line for line in demo_output.splitlines() if line.startswith("all "))
    for outcome, meaning in OUTCOME_MEANINGS.items():
        assert f"({outcome}): {meaning}" in demo_output
        assert f" {outcome}" in final
    assert "crawlsched init-db" in demo_output  # the hint for what to do next


def test_demo_runs_table_fits_80_columns():
    from rich.console import Console

    from crawlsched.cli.runs import runs_table

    console = Console(width=80, record=True)
    run = {
        "_id": "sweep-profiles@20261122T153332Z",
        "state": "finished",
        "planned": 72,
        "outstanding": 0,
        "planning": False,
        "counts": {o: 10 for o in OUTCOME_MEANINGS},
    }
    console.print(runs_table([run]))
    text = console.export_text()
    assert "sweep-profiles" in text and "@20261122T153332Z" in text and "finished" in text
    assert "…" not in text
    assert max(len(line) for line in text.splitlines()) <= 80

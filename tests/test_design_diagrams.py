"""docs/design.md draws the crawl core's state machines with the diagrams of the modules that
define them (their docstrings), so the document cannot drift from the code: a diagram changed
in one place only fails here."""

from __future__ import annotations

import re
from pathlib import Path

from crawlsched.planning import batch_states
from crawlsched.resources import host_slices

DESIGN = Path(__file__).resolve().parents[1] / "docs" / "design.md"
MERMAID = re.compile(r"```mermaid\n(.*?)```", re.S)


def test_every_state_diagram_of_the_design_is_the_code_s_own():
    in_code = MERMAID.findall(batch_states.__doc__ or "") + MERMAID.findall(
        host_slices.__doc__ or ""
    )
    in_design = MERMAID.findall(DESIGN.read_text())
    assert len(in_code) == 3  # a batch, the loop over its pages, a host's slice
    assert in_design == in_code

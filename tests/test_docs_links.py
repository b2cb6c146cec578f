"""Every relative link in README.md and docs/ leads to a file of this repository."""

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_docs_relative_links_resolve():
    documents = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    assert len(documents) > 1
    checked = 0
    for document in documents:
        for target in LINK.findall(document.read_text()):
            if target.startswith(("http://", "https://", "mailto:", "#")):
                continue
            path = (document.parent / target.split("#")[0]).resolve()
            assert path.exists(), f"{document.name} links to missing {target}"
            checked += 1
    assert checked > 0


def test_docs_stand_alone():
    for document in [REPO / "README.md", *(REPO / "docs").glob("*.md")]:
        text = document.read_text()
        assert "DESIGN.md" not in text and "../shared" not in text, document.name
        assert not re.search(r"\b(the|next|later) issues?\b", text), document.name

"""README.md and docs/ stand alone: every relative link leads to a file (and heading) here."""

import re
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LINK = re.compile(r"\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")


def _documents() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def _outside_code(text: str) -> list[str]:
    """The lines of a Markdown document that are not inside a fenced code block."""
    lines, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    return lines


def anchors(document: Path) -> set[str]:
    """The anchors GitHub gives a document's headings: lower case, punctuation dropped, spaces
    to hyphens, and -1, -2 … on repeats."""
    seen: Counter = Counter()
    found = set()
    for line in _outside_code(document.read_text()):
        if match := HEADING.match(line):
            slug = re.sub(r"[^\w\- ]", "", match.group(1).lower()).replace(" ", "-")
            found.add(f"{slug}-{seen[slug]}" if seen[slug] else slug)
            seen[slug] += 1
    return found


def test_anchor_slugs_follow_github():
    readme_anchors = anchors(REPO / "README.md")
    assert {"set-up", "not-built-yet", "which-store-each-mode-uses-and-what-lasts"} <= (
        readme_anchors
    )


def test_docs_relative_links_resolve():
    documents = _documents()
    assert len(documents) > 1
    checked = 0
    for document in documents:
        for line in _outside_code(document.read_text()):
            for target in LINK.findall(line):
                if target.startswith(("http://", "https://", "mailto:")):
                    continue
                path_part, _, anchor = target.partition("#")
                path = (document.parent / path_part).resolve() if path_part else document
                assert path.exists(), f"{document.name} links to missing {target}"
                assert path.is_relative_to(REPO), f"{document.name} links outside: {target}"
                if anchor:
                    assert path.suffix == ".md", f"{document.name}: anchor into {target}"
                    assert anchor in anchors(path), f"{document.name}: no heading for {target}"
                checked += 1
    assert checked > 0


def test_docs_stand_alone():
    for document in _documents():
        text = document.read_text()
        assert "DESIGN.md" not in text and "../shared" not in text, document.name
        assert not re.search(r"\bissues?\b", text, re.IGNORECASE), document.name
        assert not re.search(r"§\s*\d", text), document.name  # sections of a missing document


def test_readme_starts_with_the_two_set_up_commands():
    text = (REPO / "README.md").read_text()
    set_up = text[text.index("## Set up") : text.index("\n## ", text.index("## Set up") + 1)]
    commands = re.findall(r"```bash\n(.*?)\n```", set_up, re.DOTALL)
    assert len(commands) == 2
    assert "crawlsched demo" in commands[0] and "pip install" in commands[0]
    assert commands[1] == "bash scripts/test"
    assert (REPO / "LICENSE").read_text().startswith("MIT License")

"""The mathematics lives in the project: a theory page per model, reachable from the site's
toctrees, and the package's docstrings and comments pointing to those pages or to the papers,
never to an issue thread (which is not in the repository)."""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PACKAGE = ("algorithms", "pipeline", "storage", "src")
THEORY = ("memo", "priors", "dense", "nrm", "tdpm", "ddcrp")
ISSUE = re.compile(r"\bissues?\s*#?\s*\d+", re.IGNORECASE)


def toctree(text: str) -> list[str]:
    """The entries of every ``.. toctree::`` directive of an reStructuredText page."""
    entries: list[str] = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.strip() != ".. toctree::":
            continue
        for body in lines[i + 1:]:
            if body and not body.startswith(" "):
                break
            if body.strip() and not body.strip().startswith(":"):
                entries.append(body.strip())
    return entries


def prose(path: Path) -> list[tuple[int, str]]:
    """(line, text) of each comment and string literal of a Python file: where a citation can
    be."""
    tokens = tokenize.generate_tokens(io.StringIO(path.read_text()).readline)
    return [(t.start[0], t.string) for t in tokens
            if t.type in (tokenize.COMMENT, tokenize.STRING)]


def sources() -> list[Path]:
    return sorted(p for d in PACKAGE for p in (ROOT / d).rglob("*.py"))


def test_no_docstring_or_comment_cites_an_issue() -> None:
    cited = [f"{p.relative_to(ROOT)}:{line}: {ISSUE.search(text).group()}"
             for p in sources() for line, text in prose(p) if ISSUE.search(text)]
    assert not cited, "cite the paper's equation or docs/theory/*.rst instead:\n" + "\n".join(cited)


def test_the_pattern_finds_the_citations_it_forbids() -> None:
    for text in ("(issue 12)", "see Issue #45", "issues 11"):
        assert ISSUE.search(text), text
    assert not ISSUE.search("an issue of the paper's copy")


@pytest.mark.parametrize("name", THEORY)
def test_each_theory_page_is_in_the_sites_toctree(name: str) -> None:
    page = DOCS / "theory" / f"{name}.rst"
    assert page.is_file(), page
    assert "theory/index" in toctree((DOCS / "index.rst").read_text())
    assert name in toctree((DOCS / "theory" / "index.rst").read_text())
    assert ".. math::" in page.read_text()  # the derivations, not only prose


def test_the_pages_the_package_points_to_exist() -> None:
    cited = {m for p in sources() for _, text in prose(p)
             for m in re.findall(r"docs/[\w/]+\.rst", text)}
    assert any(c.startswith("docs/theory/") for c in cited)
    assert [c for c in sorted(cited) if not (ROOT / c).is_file()] == []


def test_the_modules_the_theory_pages_name_exist() -> None:
    named = {m for name in THEORY
             for m in re.findall(r"``((?:algorithms|pipeline)/[\w/]+\.py)``",
                                 (DOCS / "theory" / f"{name}.rst").read_text())}
    assert len(named) > 10
    assert [m for m in sorted(named) if not (ROOT / m).is_file()] == []

"""The documents in the repository stay true to it: links between them resolve, nothing refers to a document
that is not in the repository, and docs/failure-modes.md and tests/regressions/ name each other correctly."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", ROOT / "SECURITY.md", *sorted((ROOT / "docs").glob("*.md"))]
FAILURE_MODES = ROOT / "docs" / "failure-modes.md"
REGRESSIONS = ROOT / "tests" / "regressions"
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _anchors(path: Path) -> set[str]:
    """GitHub's anchors for the headings of a Markdown file."""
    out = set()
    fenced = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            out.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return out


def test_links_between_documents_resolve():
    """Every relative link in README.md, SECURITY.md and docs/ names a file that exists, and a heading of it."""
    broken = []
    for doc in DOCS:
        for target in LINK.findall(doc.read_text(encoding="utf-8")):
            if "://" in target or target.startswith("mailto:"):
                continue
            path, _, anchor = target.partition("#")
            dest = (doc.parent / path).resolve() if path else doc
            if not dest.exists() or (anchor and anchor not in _anchors(dest)):
                broken.append(f"{doc.relative_to(ROOT)}: {target}")
    assert broken == []


def test_nothing_refers_to_documents_outside_the_repository():
    """No file of the project cites the old, unpublished design notes (pitfall numbers, wire-format sections,
    design sections): what a maintainer needs is in docs/."""
    pattern = re.compile(r"PITFALLS?(\.md| \d)|WIRE(\.md| [A-F]\d)|DESIGN( section|\.md)")
    files = [*DOCS, ROOT / "Makefile", ROOT / "pyproject.toml", ROOT / "bench" / "README.md"]
    for folder in ("toolwire", "tests", "fuzz", "bench"):
        files += [p for p in (ROOT / folder).rglob("*.py") if "fixtures" not in p.parts]
    found = [f"{p.relative_to(ROOT)}:{n}" for p in files if p != Path(__file__).resolve()
             for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if pattern.search(line)]
    assert found == []


def _regression_tests() -> dict[str, set[str]]:
    """Test module file name → its test function names, for tests/regressions/."""
    out = {}
    for path in sorted(REGRESSIONS.glob("test_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        out[path.name] = {n.name for n in tree.body
                          if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name.startswith("test_")}
    return out


def test_every_regression_module_and_numbered_test_has_its_failure_mode():
    """docs/failure-modes.md names every module of tests/regressions/, has an entry for the number of every
    ``test_pitfall_NN_…`` test, and every test it names exists."""
    text = FAILURE_MODES.read_text(encoding="utf-8")
    tests = _regression_tests()
    assert [name for name in tests if name not in text] == []
    entries = {int(n) for n in re.findall(r"^### (\d+)\. ", text, flags=re.M)}
    numbers = {int(m.group(1)) for names in tests.values() for t in names
               if (m := re.match(r"test_pitfall_(\d+)_", t))}
    assert numbers and numbers <= entries
    named = set(re.findall(r"`(?:[\w.]+::)?(test_\w+)`", text))
    every = set().union(*tests.values())
    assert named and named - every == set()

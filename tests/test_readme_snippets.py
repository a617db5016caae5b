"""Every ```python block of README.md and of every page under docs/ runs, as it is when the tests are collected.

Each block runs as a program of its own in a fresh Python process, in an empty temporary directory, against
this checkout's ``toolwire``. A simulated provider (``toolwire.sim.SimProvider``) serves every dialect for the
whole module, and the environment points the provider clients at it (``OPENAI_BASE_URL``, ``ANTHROPIC_BASE_URL``,
``GEMINI_BASE_URL`` and their API keys), so a snippet written for a real provider talks to the simulator. A
snippet that names ``TOOLWIRE_PG_DSN`` gets a fresh database of the test PostgreSQL server (the ``pg_dsn``
fixture) in that variable.

HTML comments right before a block (the nearest line that is not blank) direct the test:

* ``<!-- snippet: skip (reason) -->``: the block is not run (a real provider key or service it cannot do
  without); the reason is required. Keep these rare: prefer rewriting the snippet for the simulator.
* ``<!-- snippet: continued -->``: the block is the rest of the program the block before it started (say,
  the worker set-up, then the code that uses it); the two run as one program.
* ``<!-- snippet: output -->`` before a ```text block: what the program before it prints (its standard output,
  compared line by line after stripping trailing blanks).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from toolwire.sim import SimProvider

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
FENCE = re.compile(r"^```(\S*)\s*$")
DIRECTIVE = re.compile(r"^<!--\s*snippet:\s*(?P<what>\S+)\s*(?:\((?P<reason>[^)]*)\))?\s*-->$")
KNOWN = {"skip", "continued", "output"}
#: the pages whose examples run: the README and every docs page
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]


@dataclass
class Program:
    """One program made of README blocks: where its first block starts, its code, and why it is skipped."""

    line: int
    code: str
    skip: str | None = None
    lines: list[int] = field(default_factory=list)
    page: str = "README.md"
    #: what the program prints, when the page shows it (an ``output`` block)
    output: str | None = None


def python_blocks(text: str) -> list[tuple[int, str, str | None, str | None]]:
    """``(line, code, directive, reason)`` of every ```python block of ``text``; ``line`` is the fence's line
    number (1-based), the directive the HTML comment on the nearest non-blank line before it, if any."""
    lines = text.splitlines()
    blocks = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if m is None:
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith("```")), len(lines))
        if m.group(1) in ("python", "text"):
            k = i - 1
            while k >= 0 and not lines[k].strip():
                k -= 1
            d = DIRECTIVE.match(lines[k].strip()) if k >= 0 else None
            what = d and d.group("what")
            if m.group(1) == "python" or what == "output":
                blocks.append((i + 1, "\n".join(lines[i + 1:end]) + "\n", what, d and d.group("reason")))
        i = end + 1
    return blocks


def programs(text: str, page: str = "README.md") -> list[Program]:
    """The programs of ``text``: a ``continued`` block joins the one before it, an ``output`` block is what the
    one before it prints."""
    out: list[Program] = []
    for line, code, directive, reason in python_blocks(text):
        if directive == "output":
            assert out and out[-1].output is None, f"{page}:{line}: an output block follows the program it shows"
            out[-1].output = code
            continue
        if directive == "continued" and out:
            out[-1].code += "\n" + code
            out[-1].lines.append(line)
            continue
        out.append(Program(line=line, code=code, skip=reason if directive == "skip" else None, lines=[line],
                           page=page))
    return out


def _page_name(path: Path) -> str:
    return str(path.relative_to(ROOT))


PROGRAMS = [p for page in PAGES for p in programs(page.read_text(encoding="utf-8"), _page_name(page))]


@pytest.mark.parametrize("page", PAGES, ids=_page_name)
def test_every_snippet_directive_is_known(page):
    """Every snippet directive of a page is a known one, with its reason when it skips (a misspelt directive
    would silently run or skip a block)."""
    name = _page_name(page)
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip().startswith("<!-- snippet"):  # a directive is a line of its own
            continue
        d = DIRECTIVE.match(line.strip())
        assert d is not None and d.group("what") in KNOWN, f"{name}:{number}: unknown directive {line!r}"
        if d.group("what") == "skip":
            assert (d.group("reason") or "").strip(), f"{name}:{number}: a skip needs its reason"


def test_readme_has_python_snippets():
    assert len([p for p in PROGRAMS if p.page == "README.md"]) >= 5


def test_continued_blocks_join_the_program_before_them():
    """A block marked continued runs in the same program as the block before it; others run alone."""
    text = ("```python\na = 1\n```\n\n<!-- snippet: continued -->\n```python\nprint(a)\n```\n\n"
            "<!-- snippet: skip (needs a key) -->\n\n```python\nboom()\n```\n```sh\nls\n```\n")
    progs = programs(text)
    assert [(p.lines, p.code, p.skip) for p in progs] == [
        ([1, 6], "a = 1\n\nprint(a)\n", None), ([12], "boom()\n", "needs a key")]


def test_an_output_block_is_what_the_program_before_it_prints():
    text = ("```python\nprint(1)\n```\n\n<!-- snippet: output -->\n```text\n1\n```\n\n```text\nnot output\n```\n")
    [prog] = programs(text)
    assert (prog.code, prog.output) == ("print(1)\n", "1\n")


@pytest.fixture(scope="module")
def sim_base_url():
    """One simulated provider for the module's snippets."""
    sim = SimProvider()
    with sim.serve() as base_url:
        yield base_url


def _fresh_database(url: str) -> str:
    """A new, empty database on the server of the ``postgresql://`` ``url``; its URL."""
    import psycopg

    name = f"snippet_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return urlunsplit(urlsplit(url)._replace(path=f"/{name}"))


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: f"{p.page}:{p.line}")
def test_snippet_runs(program, sim_base_url, tmp_path, request):
    """The snippet runs to the end, exit status 0, in a fresh process in an empty directory, and prints what
    its page says it prints."""
    if program.skip is not None:
        pytest.skip(f"{program.page}:{program.line}: {program.skip}")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_", "GEMINI_", "GOOGLE_"))}
    env.update(PYTHONPATH=str(ROOT), OPENAI_BASE_URL=sim_base_url, ANTHROPIC_BASE_URL=sim_base_url,
               GEMINI_BASE_URL=sim_base_url, OPENAI_API_KEY="sim-key", ANTHROPIC_API_KEY="sim-key",
               GEMINI_API_KEY="sim-key")
    if "TOOLWIRE_PG_DSN" in program.code:
        env["TOOLWIRE_PG_DSN"] = _fresh_database(request.getfixturevalue("pg_dsn"))
    script = tmp_path / "snippet.py"
    script.write_text(program.code, encoding="utf-8")
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=180, check=False)
    assert proc.returncode == 0, (f"{program.page}:{program.lines} exited {proc.returncode}\n--- stdout\n"
                                  f"{proc.stdout}\n--- stderr\n{proc.stderr}")
    if program.output is not None:
        shown = [line.rstrip() for line in program.output.rstrip().splitlines()]
        printed = [line.rstrip() for line in proc.stdout.rstrip().splitlines()]
        assert printed == shown, f"{program.page}:{program.lines} printed something else than its page shows"

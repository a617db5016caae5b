"""toolwire ships its annotations (PEP 561, ``toolwire/py.typed``): an application written against the public API
(``tests/typing/app.py``) passes ``mypy --strict`` with no ``type: ignore``, and runs.

mypy runs from a temporary directory with the repository on ``PYTHONPATH``, so it finds toolwire the way it finds
an installed package: it reads the package only because of ``py.typed`` (a copy without the marker is refused)
and reports errors in the program only. A program with deliberate mistakes shows that the check is real.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
import sys
import textwrap
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TYPING = ROOT / "tests" / "typing"
CONFIG = TYPING / "mypy.ini"
APP = TYPING / "app.py"

#: three mistakes mypy can only see through toolwire's annotations
WRONG = '''\
from typing import Any

import toolwire


def names(turn: toolwire.Turn) -> list[str]:
    return [call.name for call in turn.calls]


def answer(turn: toolwire.Turn, results: list[toolwire.ToolResult], history: list[dict[str, Any]]) -> None:
    history.append(toolwire.encode_results(turn, results))


def slower(tool: toolwire.Tool) -> None:
    tool.timeout = "60"
'''


def _env(python_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(python_path), *filter(None, [env.get("PYTHONPATH")])])
    return env


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory outside the repository, with one mypy cache for the module's runs."""
    return tmp_path_factory.mktemp("typing")


def mypy(workdir: Path, name: str, source: str, *, package_root: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """mypy on ``source`` (written to ``workdir / name``), run in ``workdir`` with ``package_root`` on PYTHONPATH."""
    program = workdir / name
    program.write_text(source)
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(CONFIG), "--cache-dir", str(workdir / ".mypy_cache"),
         "--no-color-output", name],
        cwd=workdir, env=_env(package_root), capture_output=True, text=True, timeout=300)


def test_the_application_passes_mypy_strict(workdir: Path) -> None:
    source = APP.read_text()
    comments = [t.string for t in tokenize.generate_tokens(io.StringIO(source).readline) if t.type == tokenize.COMMENT]
    assert not [c for c in comments if re.search(r"type:\s*ignore", c)]
    done = mypy(workdir, "app.py", source)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Success: no issues found in 1 source file" in done.stdout


def test_mypy_reports_deliberate_type_errors(workdir: Path) -> None:
    """A ToolCall's name may be None, encode_results gives a list of messages, and a Tool's timeout is a number."""
    done = mypy(workdir, "wrong.py", WRONG)
    assert done.returncode == 1, done.stdout + done.stderr
    errors = [line for line in done.stdout.splitlines() if ": error: " in line]
    assert len(errors) == 3, done.stdout
    assert re.fullmatch(r"wrong\.py:7: error: List comprehension has incompatible type List\[str \| None\]; "
                        r"expected List\[str\]\s+\[misc\]", errors[0], re.IGNORECASE), errors[0]
    assert errors[1].startswith('wrong.py:11: error: Argument 1 to "append" of "list" has incompatible type '
                                '"list[dict[str, Any]]"; expected "dict[str, Any]"'), errors[1]
    assert errors[1].endswith("[arg-type]")
    assert errors[2].startswith('wrong.py:15: error: Incompatible types in assignment (expression has type "str", '
                                'variable has type "float | None")'), errors[2]


def test_without_py_typed_mypy_does_not_read_the_package(tmp_path: Path) -> None:
    """The marker is what makes the package's annotations count: a copy without it is an untyped import."""
    package_root, run = tmp_path / "site", tmp_path / "run"
    shutil.copytree(ROOT / "toolwire", package_root / "toolwire",
                    ignore=shutil.ignore_patterns("__pycache__", "py.typed"))
    run.mkdir()
    done = mypy(run, "app.py", APP.read_text(), package_root=package_root)
    assert done.returncode == 1
    assert 'Skipping analyzing "toolwire": module is installed, but missing library stubs or py.typed marker' \
        in done.stdout, done.stdout


def test_py_typed_is_part_of_the_built_package(tmp_path: Path) -> None:
    """pyproject's package data puts py.typed next to the modules (what a wheel holds: setuptools' build_py)."""
    assert (ROOT / "toolwire" / "py.typed").is_file()
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "toolwire", src / "toolwire", ignore=shutil.ignore_patterns("__pycache__"))
    done = subprocess.run([sys.executable, "-c", "import setuptools; setuptools.setup()", "-q", "build_py", "-d",
                           str(tmp_path / "lib")], cwd=src, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "lib" / "toolwire" / "py.typed").is_file()
    assert (tmp_path / "lib" / "toolwire" / "registry" / "tool.py").is_file()


def test_the_application_runs() -> None:
    """The type-checked program is a working one (it talks to the simulated provider over loopback HTTP)."""
    done = subprocess.run([sys.executable, str(APP)], cwd=ROOT, env=_env(ROOT), capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "whole: get_weather {'location': 'Paris'}" in out
    assert "openai-responses: ['reasoning', 'custom_tool_call', 'function_call', 'custom_tool_call_output', " \
           "'function_call_output']" in out
    assert "'You are 170 cm tall.' fallback=False" in out
    assert "anthropic: 'Saved: 70 kg'; saved [('weight', 70.0, 'kg')]" in out


def test_the_readme_typing_example_runs_and_type_checks(workdir: Path) -> None:
    """The README's Typing section holds one self-contained program: it runs, and passes mypy --strict."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("\n## Typing\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.DOTALL)
    assert len(blocks) == 1
    source = textwrap.dedent(blocks[0])
    done = subprocess.run([sys.executable, "-c", source], cwd=workdir, env=_env(ROOT), capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    checked = mypy(workdir, "readme_typing.py", source)
    assert checked.returncode == 0, checked.stdout + checked.stderr

"""The toolwire command line: user mistakes are reported as such, every declaration problem is listed."""

from __future__ import annotations

import json
from pathlib import Path

from .cli_helpers import python

MAIN = "import sys; from toolwire.cli import main; sys.exit(main(sys.argv[1:]))"


def _chat(tmp_path: Path, module: str) -> tuple[int, str]:
    proc = python(MAIN, tmp_path, "chat", "--provider", "anthropic", "--model", "m", "--tools", module,
                  "--base-url", "http://127.0.0.1:9", "hi", env={"ANTHROPIC_API_KEY": "k"})
    return proc.returncode, proc.stderr


def test_chat_tools_module_raising_on_import_is_a_usage_error(tmp_path: Path) -> None:
    """`--tools boom` whose import raises RuntimeError is reported as the tools module's error, not 'internal error'."""
    (tmp_path / "boom.py").write_text("raise RuntimeError('kaboom on import')\n")
    rc, err = _chat(tmp_path, "boom")
    assert rc != 0 and "kaboom" in err
    assert "internal error" not in err, err


def test_chat_tools_module_syntax_error_is_a_usage_error(tmp_path: Path) -> None:
    """`--tools syn` with a SyntaxError in ./syn.py names the module's problem, not 'internal error (SyntaxError)'."""
    (tmp_path / "syn.py").write_text("def f(:\n")
    rc, err = _chat(tmp_path, "syn")
    assert rc != 0
    assert "internal error" not in err, err


def test_chat_tools_module_shadowing_stdlib_is_explained(tmp_path: Path) -> None:
    """`--tools json` with ./json.py says the name resolves to another module (stdlib json), not 'expected TOOLS'."""
    (tmp_path / "json.py").write_text("TOOLS = []\n")
    proc = python("import sys, os; sys.path.remove('') if '' in sys.path else None; "
                  "sys.path = [p for p in sys.path if p not in ('', os.getcwd())]; " + MAIN, tmp_path,
                  "chat", "--provider", "anthropic", "--model", "m", "--tools", "json",
                  "--base-url", "http://127.0.0.1:9", "hi", env={"ANTHROPIC_API_KEY": "k"})
    assert proc.returncode != 0
    assert "json.py" in proc.stderr or "shadow" in proc.stderr or "stdlib" in proc.stderr.lower(), proc.stderr


def test_declare_strict_reports_every_bad_tool(tmp_path: Path) -> None:
    """`toolwire declare --strict` on a file with four bad tools prints one line per problem (4 lines), exit 1."""
    tools = [
        {"name": "bad name!", "description": "x", "input_schema": {"type": "object"}},
        {"name": "arr", "description": "x", "input_schema": {"type": "array"}},
        {"name": "neg", "description": "x", "input_schema": {"type": "object", "properties": {
            "b": {"not": {"type": "string"}}}, "required": ["b"]}},
        {"name": "badschema", "description": "x", "input_schema": {"type": "object", "properties": {
            "b": {"type": 12}}}},
    ]
    path = tmp_path / "tools.json"
    path.write_text(json.dumps(tools))
    proc = python(MAIN, tmp_path, "declare", str(path), "--provider", "openai-chat", "--strict")
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    for name in ("bad name!", "arr", "neg", "badschema"):
        assert any(name in ln for ln in lines), (name, proc.stderr)


def test_demo_workers_without_dbos_says_install_the_extra(tmp_path: Path) -> None:
    """`toolwire demo --workers 1` without dbos installed is a usage error naming toolwire[dbos], not 'internal error'."""
    code = "import sys; sys.modules['dbos'] = None; " + MAIN
    proc = python(code, tmp_path, "demo", "--workers", "1")
    assert proc.returncode == 2, proc.stderr
    assert "toolwire[dbos]" in proc.stderr and "internal error" not in proc.stderr, proc.stderr

"""The ``toolwire`` command as a whole: ``python -m toolwire``, help for every option, ``chat --tools`` found in
the current directory, and ``declare --strict`` reporting every problem of a tool set."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from toolwire.cli import build_parser
from toolwire.sim import SCENARIOS, SimProvider

ROOT = Path(__file__).resolve().parent.parent


def _parsers(parser: argparse.ArgumentParser, prog: str = "toolwire"):
    """``(prog, parser)`` for the parser and every subcommand's parser below it."""
    yield prog, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, f"{prog} {name}")


def test_every_option_of_every_command_has_help():
    """Every argument, option and subcommand of every command has non-empty help text (-h/--help aside)."""
    missing = []
    commands = 0
    for prog, parser in _parsers(build_parser()):
        commands += 1
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            if isinstance(action, argparse._SubParsersAction):
                missing += [f"{prog} {c.dest}" for c in action._choices_actions if not (c.help or "").strip()]
            if not (action.help or "").strip():
                missing.append(f"{prog} {'/'.join(action.option_strings) or action.dest}")
    assert commands == 11  # toolwire, its eight commands, and durable's recover and executors
    assert missing == []


def _cli(*args: str, cwd: Path | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=cwd or ROOT, env=env, capture_output=True, text=True,
                          timeout=120, check=False)


def test_python_dash_m_toolwire_runs_the_command_line():
    """``python -m toolwire`` is the ``toolwire`` command: --version, --help, and a subcommand."""
    version = _cli("-m", "toolwire", "--version")
    assert version.returncode == 0 and version.stdout.startswith("toolwire ")
    assert "declare" in _cli("-m", "toolwire", "--help").stdout
    body = json.dumps({"type": "message", "id": "m", "role": "assistant", "stop_reason": "tool_use", "content": [
        {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"b": 2}}]})
    out = subprocess.run([sys.executable, "-m", "toolwire", "parse", "--provider", "anthropic"], input=body,
                         cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0 and json.loads(out.stdout)["calls"][0]["args"] == {"b": 2}


def test_chat_finds_a_tools_module_in_the_current_directory(tmp_path):
    """``toolwire chat --tools mytools`` imports ./mytools.py, as ``python -m`` would, although the console
    script's own directory (not the current one) is first on its path."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "mytools.py").write_text(
        "from toolwire.harness.demo_tools import DemoWorld\n\nTOOLS = DemoWorld().tools()\n")
    bindir = tmp_path / "bin"  # where a console script lives: its directory, not the cwd, is sys.path[0]
    bindir.mkdir()
    (bindir / "toolwire").write_text("import sys\nfrom toolwire.cli import main\n\nsys.exit(main())\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT), ANTHROPIC_API_KEY="sim-key")
    sim = SimProvider()
    with sim.serve() as base_url:
        proc = _cli(str(bindir / "toolwire"), "chat", "--provider", "anthropic", "--model", "sim-model", "--tools",
                    "mytools", "--base-url", base_url, "--json", SCENARIOS["height"].prompts["en"], cwd=work, env=env)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert "170 cm" in doc["answer"] and [c["result_kind"] for c in doc["calls"]] == ["ok"]


STRICT_PROBLEMS = [
    {"name": "tagger", "description": "Tags.", "input_schema": {"type": "object", "properties": {
        "tags": {"type": "object", "additionalProperties": {"type": "string"}}}}},
    {"name": "fine", "description": "Fine.", "input_schema": {"type": "object", "properties": {
        "a": {"type": "string"}}}},
    {"name": "matcher", "description": "Matches.", "input_schema": {"type": "object", "properties": {
        "x": {"oneOf": [{"type": "string"}, {"type": "integer"}]}}}},
    {"name": "bad name!", "description": "Badly named.", "input_schema": {"type": "object", "properties": {
        "y": {"type": "string"}}}},
]


@pytest.mark.parametrize("provider", ["openai-chat", "openai-responses"])
def test_declare_strict_reports_every_problem_of_the_tool_set(provider, tmp_path):
    """``declare --strict``: one stderr line for each tool strict mode refuses and each limit another tool
    breaks, nothing on stdout, exit 1."""
    path = tmp_path / "tools.json"
    path.write_text(json.dumps(STRICT_PROBLEMS))
    proc = _cli("-m", "toolwire", "declare", str(path), "--provider", provider, "--strict")
    assert proc.returncode == 1 and proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 3 and "Traceback" not in proc.stderr
    assert "'tagger'" in lines[0] and "additionalProperties" in lines[0]
    assert "'matcher'" in lines[1] and "oneOf" in lines[1]
    assert "'bad name!'" in lines[2] and "name_pattern" in lines[2]

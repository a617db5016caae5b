"""Helpers for the command-line and packaging regression tests: dispatch one call, run Python in a subprocess."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import toolwire
from tests.bodies import body

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable


def run(tool: Any, args: Any, provider: str = "anthropic") -> list[tuple[str, str]]:
    turn = toolwire.parse(provider, body(provider, [("c1", tool.name, args)]))
    results = toolwire.Dispatcher(toolwire.Registry([tool])).run(turn, conversation_id="c")
    return [(r.kind.value, r.content) for r in results]


def arun(tool: Any, args: Any, provider: str = "openai-chat") -> list[tuple[str, str]]:
    turn = toolwire.parse(provider, body(provider, [("c1", tool.name, args)]))

    async def go() -> Any:
        return await toolwire.Dispatcher(toolwire.Registry([tool])).arun(turn, conversation_id="c")

    return [(r.kind.value, r.content) for r in asyncio.run(go())]


def python(code: str, cwd: str | os.PathLike[str] | None = None, *args: str,
           env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter that imports this worktree's toolwire."""
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run([PY, "-c", code, *args], capture_output=True, text=True, cwd=cwd, env=full_env,
                          timeout=120)

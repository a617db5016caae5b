"""Helpers for the command-line and packaging regression tests: the repository root, Python in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable


def python(code: str, cwd: str | os.PathLike[str] | None = None, *args: str,
           env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter that imports this checkout's toolwire."""
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run([PY, "-c", code, *args], capture_output=True, text=True, cwd=cwd, env=full_env,
                          timeout=120)

"""toolwire's mutation fuzzer: ``python -m fuzz [--seconds N | --inputs N] [--seed S] [--dialect D ...]
[--jobs J] [--out DIR]``, and ``python -m fuzz --replay FILE``.

Seeds are the recordings in ``tests/fixtures/real`` and generated streams and bodies of every dialect
(``corpus``). Each input is a seed under a stack of byte-, event- and JSON-level mutations (``mutators``); it is
parsed whole and in pieces, dispatched, answered, written into a history and repaired, and the properties of
``properties`` are checked. Distinct failures are shrunk (``minimize``) and written as reproducers (``runner``).

Nothing is imported eagerly (the coverage-guided mode must instrument toolwire before anything imports it).
"""

from __future__ import annotations

from typing import Any

__all__ = ["Case", "Failure", "PROPERTIES", "Report", "check", "replay", "run"]


def __getattr__(name: str) -> Any:
    if name in ("Case", "Failure", "PROPERTIES", "check"):
        from . import properties

        return getattr(properties, name)
    if name in ("Report", "replay", "run"):
        from . import runner

        return getattr(runner, name)
    raise AttributeError(name)

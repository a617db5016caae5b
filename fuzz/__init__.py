"""toolwire's mutation fuzzer: ``python -m fuzz [--seconds N | --inputs N] [--seed S] [--dialect D ...]
[--jobs J] [--out DIR]``, and ``python -m fuzz --replay FILE``.

Seeds are the recordings in ``tests/fixtures/real`` and generated streams and bodies of every dialect
(``corpus``). Each input is a seed under a stack of byte-, event- and JSON-level mutations (``mutators``); it is
parsed whole and in pieces, dispatched, answered, written into a history and repaired, and the properties of
``properties`` are checked. Distinct failures are shrunk (``minimize``) and written as reproducers (``runner``).
"""

from __future__ import annotations

from .properties import PROPERTIES, Case, Failure, check
from .runner import Report, replay, run

__all__ = ["Case", "Failure", "PROPERTIES", "Report", "check", "replay", "run"]

"""Seed inputs: every recording in ``tests/fixtures/real`` and generated streams and bodies of every dialect.

A ``Seed`` is one whole provider response: its dialect, the format it is written in (``sse``, ``jsonl`` or
``json``) and its bytes. The dialects are toolwire's registered ones; each one's generated seeds come from its test
adapter (``tests/dialects``, ``Adapter.fuzz_seeds``: the test suite's encoders, its streams in the shapes the
codec tests use, whole bodies), each with a random state of its own, so a new dialect adds seeds without changing
the others'. Everything is deterministic: the same code gives the same seeds, in the same order.
"""

from __future__ import annotations

import json
import random
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REAL = ROOT / "tests" / "fixtures" / "real"

if str(ROOT) not in sys.path:  # the test helpers are imported as ``tests.*``
    sys.path.insert(0, str(ROOT))

from toolwire.codecs import dialects as _registered  # noqa: E402 - after the path set-up above

#: every registered dialect, in the registry's order
DIALECTS = tuple(d.id for d in _registered())

__all__ = ["Seed", "DIALECTS", "load_seeds", "real_seeds", "generated_seeds"]


@dataclass(frozen=True)
class Seed:
    name: str
    dialect: str
    format: str  # sse | jsonl | json (a Gemini JSON array is "json")
    data: bytes


def real_seeds() -> list[Seed]:
    """The recordings listed in ``tests/fixtures/real/manifest.json`` (read at run time, never copied)."""
    manifest = json.loads((REAL / "manifest.json").read_text())
    out = []
    for entry in manifest:
        if entry["provider"] not in DIALECTS:
            continue
        out.append(Seed("real:" + entry["file"], entry["provider"], entry["format"],
                        (REAL / entry["file"]).read_bytes()))
    return out


def generated_seeds(per_dialect: int = 40) -> list[Seed]:
    """Deterministic generated seeds: ``per_dialect`` streams of each dialect plus whole bodies of each (its test
    adapter writes them, from a random state seeded with the dialect's id)."""
    from tests.dialects import adapter

    out = []
    for dialect in DIALECTS:
        rng = random.Random(f"20240601:{dialect}")
        out += [Seed(name, dialect, fmt, data) for name, fmt, data in adapter(dialect).fuzz_seeds(rng, per_dialect)]
    return out


def load_seeds(dialects: tuple[str, ...] | list[str] = DIALECTS, *, per_dialect: int = 40
               ) -> dict[str, list[Seed]]:
    """Seeds grouped by dialect (only those asked for), recordings first."""
    out: dict[str, list[Seed]] = {d: [] for d in dialects}
    for seed in real_seeds() + generated_seeds(per_dialect):
        if seed.dialect in out:
            out[seed.dialect].append(seed)
    return out

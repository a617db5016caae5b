"""What the adapters of dialects whose results are entries of the history list share (Responses, Interactions)."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["flat_well_formed"]


def flat_well_formed(items: list[Any], is_call: Any, call_id: Any, is_result: Any, result_id: Any,
                     is_user: Any) -> list[str]:
    """Runs of model entries; the calls of each run answered right after it, in order; nothing else."""
    problems, i, answered = [], 0, set()
    while i < len(items):
        if is_user(items[i]) or is_result(items[i]):
            i += 1
            continue
        j = i
        while j < len(items) and not is_user(items[j]) and not is_result(items[j]):
            j += 1
        ids = [call_id(x) for x in items[i:j] if is_call(x)]
        got = [result_id(x) for x in items[j:j + len(ids)] if is_result(x)]
        if ids and got != ids:
            problems.append(f"entries {i}..{j - 1}: results {got} for calls {ids}")
        answered.update(range(j, j + len(ids)))
        if items[j - 1].get("type") == "reasoning":
            problems.append(f"entry {j - 1}: reasoning with nothing after it")
        i = j
    if not any(x.get("type") == "item_reference" for x in items):  # outputs of referenced calls stay
        problems += [f"entry {k}: stray result" for k, x in enumerate(items) if is_result(x) and k not in answered]
    for k, x in enumerate(items):
        if x.get("type") == "function_call":
            args = x["arguments"]
            if not isinstance(json.loads(args) if isinstance(args, str) else args, dict):
                problems.append(f"entry {k}: arguments not an object")
    return problems

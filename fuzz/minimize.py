"""Shrink a failing case to a small one that still fails the same way (same failure key).

Deterministic: a fixed number of checks at most, no clock. Steps: drop the options the failure does not need,
delete lines then byte ranges (delta debugging, halving the range size), then merge the pieces of the chunked
parse. Deleting a range keeps the chunk boundaries where they were relative to the remaining bytes, and keeps
the case's other choices as they were.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

from .properties import Case, check, pieces_of

__all__ = ["minimize"]


class _Budget:
    def __init__(self, n: int) -> None:
        self.left = n


def _delete(case: Case, a: int, b: int) -> Case | None:
    """``case`` without ``data[a:b]``, its chunk boundaries kept where they were relative to the rest."""
    data = case.data[:a] + case.data[b:]
    pieces = case.pieces
    if pieces is not None:
        cuts, pos = [], 0
        for n in pieces:
            pos += n
            cuts.append(pos)
        new = []
        for p in cuts:
            q = p if p < a else (a if p < b else p - (b - a))
            if 0 < q < len(data) and (not new or new[-1] != q):
                new.append(q)
        pieces = [y - x for x, y in zip([0] + new, new + [len(data)]) if y > x] or [max(1, len(data))]
    return dataclasses.replace(case, data=data, pieces=pieces)


def minimize(case: Case, key: str, max_checks: int = 600) -> Case:
    """A smaller case whose ``check`` still reports ``key`` (``case`` itself if it no longer does)."""
    budget = _Budget(max_checks)

    def fails(c: Case) -> bool:
        if budget.left <= 0:
            return False
        budget.left -= 1
        return any(f.key == key for f in check(c))

    if not fails(case):
        return case
    case = dataclasses.replace(case, pieces=[len(p) for p in pieces_of(case)] or None)
    # options the failure does not need
    for change in ({"memory": False}, {"other_fmt": None}, {"rerun": False}, {"threaded": False},
                   {"concurrent": False}, {"echo": False}, {"dispatch": False}):
        trial = dataclasses.replace(case, **change)
        if trial != case and fails(trial):
            case = trial
    if not key.startswith("after_terminator|") and case.cut_format is not None:
        trial = dataclasses.replace(case, cut_format=None)
        if fails(trial):
            case = trial
    case = _ddmin_lines(case, fails, budget)
    case = _ddmin_bytes(case, fails, budget)
    case = _merge_pieces(case, fails, budget)
    return case


def _ddmin_lines(case: Case, fails: Callable[[Case], bool], budget: _Budget) -> Case:
    """Delete runs of whole lines, long runs first."""
    def bounds(data: bytes) -> list[int]:
        out, pos = [0], 0
        while True:
            j = data.find(b"\n", pos)
            if j < 0:
                break
            pos = j + 1
            out.append(pos)
        if out[-1] != len(data):
            out.append(len(data))
        return out

    lines = len(bounds(case.data)) - 1
    size = max(1, lines // 2)
    while size >= 1 and budget.left > 0:
        b = bounds(case.data)
        i = len(b) - 1 - size
        changed = False
        while i >= 0 and budget.left > 0:
            trial = _delete(case, b[i], b[min(i + size, len(b) - 1)])
            if trial is not None and fails(trial):
                case = trial
                changed = True
                b = bounds(case.data)
            i -= size
        if not changed:
            size //= 2
    return case


def _ddmin_bytes(case: Case, fails: Callable[[Case], bool], budget: _Budget) -> Case:
    size = max(1, len(case.data) // 2)
    while size >= 1 and budget.left > 0:
        i = len(case.data) - size
        changed = False
        while i >= 0 and budget.left > 0:
            trial = _delete(case, i, i + size)
            if trial is not None and trial.data != case.data and fails(trial):
                case = trial
                changed = True
            i -= size
        if not changed:
            size //= 2
        if len(case.data) <= 1:
            break
    return case


def _merge_pieces(case: Case, fails: Callable[[Case], bool], budget: _Budget) -> Case:
    """Fewer pieces: feed whole when that still fails, else merge neighbours."""
    if not case.pieces or len(case.pieces) <= 1:
        return case
    whole = dataclasses.replace(case, pieces=[max(1, len(case.data))])
    if fails(whole):
        return whole
    i = 0
    while i < len(case.pieces) - 1 and budget.left > 0:
        p = case.pieces
        trial = dataclasses.replace(case, pieces=p[:i] + [p[i] + p[i + 1]] + p[i + 2:])
        if fails(trial):
            case = trial
        else:
            i += 1
    return case

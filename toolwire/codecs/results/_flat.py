"""Result placement for dialects whose results are separate list entries (Chat tool messages, Responses output
items, Interactions function_result steps).

The dialect finds its *groups* (the calls of one model turn, and the entry after which their results belong)
and tells which entries are results and which call id they answer. ``place_results`` then gives every call of
every group exactly one result right after the group, in call order: the first result found for it (moved
there if it was elsewhere), or a synthetic one. A later result for the same call is a duplicate and is dropped;
a result with no call before it is an orphan and is dropped (kept in place when ``keep_unknown``: a history
that may reference calls it does not hold).

A result belongs to the nearest group *before it* (or the one it sits inside) that holds a call with its id, so
providers that reuse ids across turns (``call_0`` every turn) pair correctly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._common import Actions, RepairKind

__all__ = ["CallRef", "Group", "place_results"]


class CallRef:
    """One call in a stored history: its id, name, the entry that holds it, and its wire type."""

    __slots__ = ("id", "name", "position", "type")

    def __init__(self, id: str, name: str | None, position: int, type: str = "") -> None:
        self.id = id
        self.name = name
        self.position = position
        self.type = type


class Group:
    """The calls of one model turn and the position of the entry their results follow."""

    __slots__ = ("anchor", "calls", "start")

    def __init__(self, anchor: int, calls: list[CallRef], start: int | None = None) -> None:
        self.anchor = anchor
        self.calls = calls
        self.start = anchor if start is None else start  # the first entry of the turn


def place_results(items: list[Any], groups: list[Group], result_id: Callable[[Any], str | None],
                  make_missing: Callable[[CallRef], Any], actions: Actions, *, drop: set[int] | None = None,
                  keep_unknown: bool = False) -> list[Any]:
    """The repaired list (see the module docstring). ``drop``: positions the dialect removes for its own
    reasons (recorded by it)."""
    drop = drop or set()
    owners: dict[str, list[tuple[int, int, CallRef]]] = {}
    for gi, g in enumerate(groups):
        for ci, c in enumerate(g.calls):
            owners.setdefault(c.id, []).append((gi, ci, c))
    kept: dict[tuple[int, int], int] = {}
    is_result: set[int] = set()
    keep_in_place: set[int] = set()
    for i, item in enumerate(items):
        if i in drop:
            continue
        rid = result_id(item)
        if rid is None:
            continue
        is_result.add(i)
        # a call before the result, or one of the turn the result sits inside (a result misplaced before its
        # call, between a reasoning item and its function_call)
        cands = [o for o in owners.get(rid, ())
                 if o[2].position < i or groups[o[0]].start <= i <= groups[o[0]].anchor]
        if not cands:
            if keep_unknown and rid not in owners:
                keep_in_place.add(i)
                continue
            actions.add(RepairKind.DROPPED_ORPHAN, i, rid,
                        detail="a result for no call before it was dropped")
            continue
        gi, ci, call = max(cands, key=lambda o: (groups[o[0]].start, o[2].position))
        if (gi, ci) in kept:
            actions.add(RepairKind.DROPPED_DUPLICATE, i, rid, call.name,
                        detail=f"a second result for the call was dropped (the one at {kept[gi, ci]} is kept)")
            continue
        kept[gi, ci] = i
    by_anchor: dict[int, int] = {g.anchor: gi for gi, g in enumerate(groups)}
    # where each group's results already were: the results right after its anchor
    for gi, g in enumerate(groups):
        run: list[int] = []
        j = g.anchor + 1
        while j < len(items) and (j in is_result or j in drop):
            if j in is_result:
                run.append(j)
            j += 1
        run_set = set(run)
        in_run = []
        for ci, c in enumerate(g.calls):
            pos = kept.get((gi, ci))
            if pos is None:
                continue
            if pos in run_set:
                in_run.append(pos)
            else:
                actions.add(RepairKind.MOVED_RESULT, pos, c.id, c.name,
                            detail=f"moved to follow its call (at {c.position})")
        if in_run != sorted(in_run):
            actions.add(RepairKind.REORDERED_RESULTS, g.anchor, None,
                        detail="the results of this turn were put in call order")
    out: list[Any] = []
    for i, item in enumerate(items):
        if i in drop or (i in is_result and i not in keep_in_place):
            continue
        out.append(item)
        gi = by_anchor.get(i)
        if gi is None:
            continue
        for ci, c in enumerate(groups[gi].calls):
            pos = kept.get((gi, ci))
            if pos is not None:
                out.append(items[pos])
            else:
                actions.add(RepairKind.INSERTED_RESULT, c.position, c.id, c.name,
                            detail="no result was recorded for this call: an error result was inserted")
                out.append(make_missing(c))
    return out

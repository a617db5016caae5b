"""Result placement for dialects whose results are separate list entries (Chat tool messages, Responses output
items, Interactions function_result steps).

The dialect finds its *groups* (the calls of one model turn, and the entry after which their results belong)
and tells which entries are results and which call id they answer. ``place_results`` then gives every call of
every group exactly one result right after the group, in call order: the first result found for it (moved
there if it was elsewhere), or a synthetic one. A later result for the same call is a duplicate and is dropped;
a result with no call before it is an orphan and is dropped (kept in place when ``keep_unknown``: a history
that may reference calls it does not hold).

A result belongs to the nearest group *before it* (or the one it sits inside) that holds a call with its id, so
providers that reuse ids across turns (``call_0`` every turn) pair correctly. Pairing is a binary search per
result (``Pairing``) and every other step one pass, so the cost is linear in the size of the history.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._common import Actions, CallRef, Pairing, RepairKind

__all__ = ["CallRef", "Group", "place_results"]


class Group:
    """The calls of one model turn and the position of the entry their results follow."""

    __slots__ = ("anchor", "calls", "start")

    def __init__(self, anchor: int, calls: list[CallRef], start: int | None = None) -> None:
        self.anchor = anchor
        self.calls = calls
        self.start = anchor if start is None else start  # the first entry of the turn


def place_results(items: list[Any], groups: list[Group], result_id: Callable[[Any], str | None],
                  make_missing: Callable[[CallRef], Any], actions: Actions, *,
                  set_result_id: Callable[[Any, str], None] | None = None, drop: set[int] | None = None,
                  keep_unknown: bool = False) -> list[Any]:
    """The repaired list (see the module docstring). ``drop``: positions the dialect removes for its own
    reasons (recorded by it). ``set_result_id``: how to point a result at a call the dialect renamed."""
    drop = drop or set()
    pairing = Pairing()
    for gi, g in enumerate(groups):
        pairing.add(gi, g.start, g.calls)
    is_result: set[int] = set()
    keep_in_place: set[int] = set()
    for i, item in enumerate(items):
        if i in drop:
            continue
        rid = result_id(item)
        if rid is None:
            continue
        is_result.add(i)
        found = pairing.claim(rid, i)
        if found is None:
            if keep_unknown and not pairing.known(rid):
                keep_in_place.add(i)
                continue
            actions.add(RepairKind.DROPPED_ORPHAN, i, rid, detail="a result for no call before it was dropped")
            continue
        _, call, last = found
        if call is None:
            actions.add(RepairKind.DROPPED_DUPLICATE, i, last.id, last.name,
                        detail=f"a second result for the call was dropped (the one at {last.result_at} is kept)")
            continue
        call.result, call.result_at = item, i
    by_anchor: dict[int, Group] = {g.anchor: g for g in groups}
    # where each group's results already were: the results right after its anchor (runs of different groups
    # never overlap, since an anchor is not a result: one pass over the history in all)
    for g in groups:
        run: list[int] = []
        j = g.anchor + 1
        while j < len(items) and (j in is_result or j in drop):
            if j in is_result:
                run.append(j)
            j += 1
        run_set = set(run)
        in_run = []
        for c in g.calls:
            if c.result_at is None:
                continue
            if c.result_at in run_set:
                in_run.append(c.result_at)
            else:
                actions.add(RepairKind.MOVED_RESULT, c.result_at, c.id, c.name,
                            detail=f"moved to follow its call (at {c.position})")
        if in_run != sorted(in_run):
            actions.add(RepairKind.REORDERED_RESULTS, g.anchor, None,
                        detail="the results of this turn were put in call order")
    out: list[Any] = []
    for i, item in enumerate(items):
        if i in drop or (i in is_result and i not in keep_in_place):
            continue
        out.append(item)
        g = by_anchor.get(i)
        if g is None:
            continue
        for c in g.calls:
            if c.result_at is not None:
                if c.id != c.match and set_result_id is not None:
                    set_result_id(c.result, c.id)
                out.append(c.result)
            else:
                actions.add(RepairKind.INSERTED_RESULT, c.position, c.id, c.name,
                            detail="no result was recorded for this call: an error result was inserted")
                out.append(make_missing(c))
    return out

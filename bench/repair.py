"""History repair cost: ``toolwire.repair_history`` on stored conversations of growing size, per dialect.

Two shapes, each built at 1x, 4x and 10x ``n`` (outside timing) in the dialect's native request form:

* ``wide``: one assistant message with ``n`` calls, their results after it in reverse order (so the pairing and
  the reordering work on every result);
* ``turns``: ``n`` turns of a user message, one call whose id is ``call_0`` in every turn (as some servers
  number them) and its result.

A repair that pairs results with calls in constant time per result scales linearly: the ``repair`` line reports
the time at 4x and 10x over 1x (medians of interleaved repeats, ``max_calls=None`` so the cap does not stop the
10x run, the cyclic garbage collector off during each run as ``timeit`` does), against targets of 5x and 11x,
and beside them the 10x ratio of a floor (the history's JSON decoded again) for what the machine adds, and the
10x ratios of both with the collector on. With it on, both pass the point where the interpreter starts full
collections of the whole heap (none at 1x, a few at 10x), which makes the floor itself look superlinear; the
operation count, which the tests compare (``tests/test_repair_cost.py``), is the measure that sees only the code. Each report is checked outside timing: the reversed results of ``wide``
put back in call order, nothing changed in ``turns``.
"""

from __future__ import annotations

from typing import Any, Callable

import msgspec

import toolwire

from .timing import race

__all__ = ["BUILT", "SHAPES", "expected_counts", "history", "measure"]

SHAPES = ("wide", "turns")


def _chat(shape: str, n: int) -> list[Any]:
    def call(cid: str, k: int) -> dict[str, Any]:
        return {"id": cid, "type": "function", "function": {"name": "lookup", "arguments": f'{{"n": {k}}}'}}

    def result(cid: str, k: int) -> dict[str, Any]:
        return {"role": "tool", "tool_call_id": cid, "content": f"result {k}"}

    if shape == "wide":
        ids = [f"call_{k}" for k in range(n)]
        return [{"role": "user", "content": "go"},
                {"role": "assistant", "content": None, "tool_calls": [call(c, k) for k, c in enumerate(ids)]},
                *[result(c, k) for k, c in reversed(list(enumerate(ids)))]]
    out: list[Any] = []
    for k in range(n):
        out += [{"role": "user", "content": f"question {k}"},
                {"role": "assistant", "content": None, "tool_calls": [call("call_0", k)]}, result("call_0", k)]
    return out


def _anthropic(shape: str, n: int) -> list[Any]:
    def use(cid: str, k: int) -> dict[str, Any]:
        return {"type": "tool_use", "id": cid, "name": "lookup", "input": {"n": k}}

    def res(cid: str, k: int) -> dict[str, Any]:
        return {"type": "tool_result", "tool_use_id": cid, "content": f"result {k}"}

    if shape == "wide":
        ids = [f"toolu_{k}" for k in range(n)]
        return [{"role": "user", "content": "go"},
                {"role": "assistant", "content": [use(c, k) for k, c in enumerate(ids)]},
                {"role": "user", "content": [res(c, k) for k, c in reversed(list(enumerate(ids)))]}]
    out: list[Any] = []
    for k in range(n):
        out += [{"role": "user", "content": f"question {k}"},
                {"role": "assistant", "content": [use("call_0", k)]},
                {"role": "user", "content": [res("call_0", k)]}]
    return out


def _gemini(shape: str, n: int) -> list[Any]:
    def fc(cid: str, k: int) -> dict[str, Any]:
        return {"functionCall": {"id": cid, "name": "lookup", "args": {"n": k}}, "thoughtSignature": "c2ln"}

    def fr(cid: str, k: int) -> dict[str, Any]:
        return {"functionResponse": {"id": cid, "name": "lookup", "response": {"output": f"result {k}"}}}

    if shape == "wide":
        ids = [f"g{k}" for k in range(n)]
        return [{"role": "user", "parts": [{"text": "go"}]},
                {"role": "model", "parts": [fc(c, k) for k, c in enumerate(ids)]},
                {"role": "user", "parts": [fr(c, k) for k, c in reversed(list(enumerate(ids)))]}]
    out: list[Any] = []
    for k in range(n):
        out += [{"role": "user", "parts": [{"text": f"question {k}"}]},
                {"role": "model", "parts": [fc("call_0", k)]}, {"role": "user", "parts": [fr("call_0", k)]}]
    return out


def _responses(shape: str, n: int) -> list[Any]:
    def fc(cid: str, k: int) -> dict[str, Any]:
        return {"type": "function_call", "id": f"fc_{k}", "call_id": cid, "name": "lookup",
                "arguments": f'{{"n": {k}}}'}

    def out_(cid: str, k: int) -> dict[str, Any]:
        return {"type": "function_call_output", "call_id": cid, "output": f"result {k}"}

    if shape == "wide":
        ids = [f"call_{k}" for k in range(n)]
        return [{"type": "message", "role": "user", "content": "go"}, *[fc(c, k) for k, c in enumerate(ids)],
                *[out_(c, k) for k, c in reversed(list(enumerate(ids)))]]
    items: list[Any] = []
    for k in range(n):
        items += [{"type": "message", "role": "user", "content": f"question {k}"}, fc("call_0", k),
                  out_("call_0", k)]
    return items


def _interactions(shape: str, n: int) -> list[Any]:
    def fc(cid: str, k: int) -> dict[str, Any]:
        return {"type": "function_call", "id": cid, "name": "lookup", "arguments": {"n": k}}

    def fr(cid: str, k: int) -> dict[str, Any]:
        return {"type": "function_result", "call_id": cid, "name": "lookup", "result": f"result {k}"}

    def user(text: str) -> dict[str, Any]:
        return {"type": "user_input", "content": [{"type": "text", "text": text}]}

    if shape == "wide":
        ids = [f"call_{k}" for k in range(n)]
        return [user("go"), *[fc(c, k) for k, c in enumerate(ids)],
                *[fr(c, k) for k, c in reversed(list(enumerate(ids)))]]
    steps: list[Any] = []
    for k in range(n):
        steps += [user(f"question {k}"), fc("call_0", k), fr("call_0", k)]
    return steps


def _bedrock(shape: str, n: int) -> list[Any]:
    def use(cid: str, k: int) -> dict[str, Any]:
        return {"toolUse": {"toolUseId": cid, "name": "lookup", "input": {"n": k}}}

    def res(cid: str, k: int) -> dict[str, Any]:
        return {"toolResult": {"toolUseId": cid, "content": [{"text": f"result {k}"}], "status": "success"}}

    if shape == "wide":
        ids = [f"tooluse_{k}" for k in range(n)]
        return [{"role": "user", "content": [{"text": "go"}]},
                {"role": "assistant", "content": [use(c, k) for k, c in enumerate(ids)]},
                {"role": "user", "content": [res(c, k) for k, c in reversed(list(enumerate(ids)))]}]
    out: list[Any] = []
    for k in range(n):
        out += [{"role": "user", "content": [{"text": f"question {k}"}]},
                {"role": "assistant", "content": [use("call_0", k)]},
                {"role": "user", "content": [res("call_0", k)]}]
    return out


_BUILDERS: dict[str, Callable[[str, int], list[Any]]] = {
    "openai-chat": _chat,
    "anthropic": _anthropic,
    "gemini": _gemini,
    "openai-responses": _responses,
    "gemini-interactions": _interactions,
    "bedrock-converse": _bedrock,
}


#: the dialects this module can build stored histories for
BUILT = tuple(_BUILDERS)


def history(dialect: str, shape: str, n: int) -> list[Any]:
    """A stored conversation of ``dialect`` in ``shape`` with ``n`` calls (see the module docstring)."""
    return _BUILDERS[dialect](shape, n)


def expected_counts(shape: str) -> dict[str, int]:
    """What the report of a correct repair of ``shape`` counts: the reversed results put back in call order
    (``wide``), nothing (``turns``, already well formed)."""
    return {"reordered_results": 1} if shape == "wide" else {}


def _floor(messages: list[Any]) -> Any:
    """Decoding the history's JSON again: a copy built in C, about the least any repair must do (its own ratio
    shows what the machine's caches and allocator add at 10x)."""
    return msgspec.json.decode(msgspec.json.encode(messages))


def measure(dialect: str, shape: str, n: int, repeats: int, *, timeout: float,
            scales: tuple[int, ...] = (1, 4, 10), collector: bool = False) -> dict[str, Any]:
    """Medians of ``repair_history`` at each scale of ``n`` (interleaved repeats, ``timing.race``, the garbage
    collector off during each run unless ``collector``), the ratios to 1x, the floor's ratio at the largest scale,
    and ``problem``: why an answer was wrong, or None. A dialect with no history builder is a problem, not a
    crash."""
    if dialect not in _BUILDERS:
        return {"calls": {}, "problem": "no stored history of this dialect in bench/repair.py", "median_ms": {},
                "lower_bound": {}, "ratio": {}, "floor_ratio": None}
    inputs = {s: history(dialect, shape, n * s) for s in scales}
    top = scales[-1]
    contestants: dict[str, Callable[[], Any]] = {
        f"{s}x": (lambda m=inputs[s]: toolwire.repair_history(dialect, m, max_calls=None)) for s in scales}
    contestants["floor@1x"] = lambda: _floor(inputs[scales[0]])
    contestants[f"floor@{top}x"] = lambda: _floor(inputs[top])
    out = race(contestants, repeats=repeats, timeout=timeout, budget=timeout * 3, warmup=True, collector=collector)
    problem = None
    for name, o in out.items():
        if o.error:
            problem = f"{name}: {o.error}"
        elif o.has_result and not name.startswith("floor") and o.result[1].counts() != expected_counts(shape):
            problem = f"{name}: unexpected report {o.result[1].counts()}"
    base = out[f"{scales[0]}x"].median
    f1, ftop = out["floor@1x"].median, out[f"floor@{top}x"].median
    return {"calls": {s: n * s for s in scales}, "problem": problem,
            "median_ms": {s: None if out[f"{s}x"].median is None else round(out[f"{s}x"].median * 1e3, 3)
                          for s in scales},
            "lower_bound": {s: out[f"{s}x"].lower_bound for s in scales},
            "ratio": {s: (out[f"{s}x"].median / base if base and out[f"{s}x"].median else None) for s in scales},
            "floor_ratio": ftop / f1 if f1 and ftop else None}

"""``repair_history`` does work linear in the history for every dialect and every stored shape.

Times on a shared machine swing, and the interpreter's full collections make even a C floor look superlinear at
these sizes (bench/repair.py says why), so these tests count operations instead: the Python lines the repair
executes (``sys.settrace``), which is the same number on every run of the same input. A repair that pairs a
result with its call by scanning, or that walks earlier turns again for each new one, makes the count grow with
the square of the calls; a linear one keeps 4x the calls within 5x the count and 10x within 11x (the bench's
targets for time).
"""

from __future__ import annotations

import gc
import sys
import time
from typing import Any, Callable

import pytest

import toolwire
from bench import repair as repair_bench
from toolwire.codecs import PROVIDERS

SCALES = (1, 4, 10)
BASE = 40


def _lines_executed(fn: Callable[[], Any]) -> int:
    """The Python lines ``fn`` executes, counted by a trace function (deterministic for a given input)."""
    count = 0

    def trace(frame: Any, event: str, arg: Any) -> Any:
        nonlocal count
        count += 1
        return trace

    previous = sys.gettrace()
    sys.settrace(trace)
    try:
        fn()
    finally:
        sys.settrace(previous)
    return count


def _reversed_parallel_turns(provider: str, n: int) -> list[Any]:
    """``n`` turns of three parallel calls each, every turn's ids reused (``call_0`` .. ``call_2``) and its
    results stored in reverse order: pairing by id must look only inside the turn."""
    out: list[Any] = []
    for _ in range(n):
        out += repair_bench.history(provider, "wide", 3)
    return out


def test_every_registered_dialect_has_a_stored_history_for_the_repair_bench() -> None:
    """A new dialect is measured by the bench's repair line (a missing builder was a KeyError at that step)."""
    assert set(PROVIDERS) <= set(repair_bench.BUILT)


@pytest.mark.parametrize("shape", [*repair_bench.SHAPES, "wide-turns"])
@pytest.mark.parametrize("provider", PROVIDERS)
def test_repair_history_executes_a_number_of_lines_linear_in_the_calls(provider: str, shape: str) -> None:
    """4x the calls costs at most 5x the operations and 10x at most 11x, for every dialect and shape."""
    def build(n: int) -> list[Any]:
        if shape == "wide-turns":
            return _reversed_parallel_turns(provider, n)
        return repair_bench.history(provider, shape, n)

    counts = {}
    for scale in SCALES:
        messages = build(BASE * scale)
        counts[scale] = _lines_executed(lambda m=messages: toolwire.repair_history(provider, m, max_calls=None))
    ratios = {scale: counts[scale] / counts[1] for scale in SCALES}
    assert ratios[4] <= 5.0 and ratios[10] <= 11.0, (provider, shape, counts, ratios)


def _cpu_seconds(fn: Callable[[], Any], repeats: int = 3) -> float:
    """The least CPU time of ``repeats`` runs of ``fn``, the garbage collector off during each run."""
    best = float("inf")
    for _ in range(repeats):
        gc.collect()
        gc.disable()
        try:
            start = time.process_time()
            fn()
            best = min(best, time.process_time() - start)
        finally:
            gc.enable()
    return best


@pytest.mark.parametrize("shape", repair_bench.SHAPES)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_repair_history_hides_no_quadratic_step_in_c_code(provider: str, shape: str) -> None:
    """A scan done inside a builtin (``list.index``, ``in`` on a list) is one traced line: CPU time catches it.

    The bound is generous (30x for 10x the calls, where a quadratic step gives about 100x) so that a busy
    machine does not fail it; the count above is the precise check."""
    small, large = (repair_bench.history(provider, shape, n) for n in (150, 1500))
    t_small = _cpu_seconds(lambda: toolwire.repair_history(provider, small, max_calls=None))
    t_large = _cpu_seconds(lambda: toolwire.repair_history(provider, large, max_calls=None))
    assert t_large <= 30 * max(t_small, 1e-3), (provider, shape, t_small, t_large)


@pytest.mark.parametrize("shape", repair_bench.SHAPES)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_repair_history_puts_back_what_the_bench_expects(provider: str, shape: str) -> None:
    """The bench's histories are repaired as it checks (reversed results reordered, the turns left alone)."""
    _, report = toolwire.repair_history(provider, repair_bench.history(provider, shape, 25))
    assert report.counts() == repair_bench.expected_counts(shape)

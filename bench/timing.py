"""Interleaved repeats, medians, time budgets.

Every contestant of a race runs over the same chunks in the same process; the repeats are interleaved (round r
runs every contestant once, in an order rotated by r) so that noise on a shared machine hits all of them alike.
A run that exceeds ``timeout`` seconds is stopped (SIGALRM) and counts as "more than ``timeout``"; a
contestant whose runs add up to more than ``budget`` seconds is not repeated further (quadratic peers would
otherwise take the whole bench). A contestant faster than ``MIN_SAMPLE`` is run several times per sample (the
count fixed after its warm-up run) and its sample divided by that count, so timer and cache noise do not
dominate tiny workloads. Before each sample, ``gc.collect()`` clears what the previous run left; the objects
alive when a race starts are frozen (``gc.freeze()``), so that collection is cheap and the same for everyone.
"""

from __future__ import annotations

import gc
import signal
import statistics
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable

__all__ = ["Outcome", "race", "MIN_SAMPLE"]

#: shortest sample: runs below it are repeated inside one sample and reported per run
MIN_SAMPLE = 0.005


class _Timeout(BaseException):
    """Raised by SIGALRM inside a run that took too long (BaseException: code under test won't swallow it)."""


_armed = False


def _alarm(signum: int, frame: Any) -> None:
    if _armed:
        raise _Timeout()


@dataclass
class Outcome:
    samples: list[float] = field(default_factory=list)  # seconds
    timed_out: float | None = None  # the timeout a run exceeded
    error: str | None = None
    result: Any = None  # the first run's answer (compared outside timing)
    has_result: bool = False

    @property
    def median(self) -> float | None:
        if self.samples:
            return statistics.median(self.samples)
        return self.timed_out

    @property
    def lower_bound(self) -> bool:
        """True when the figure is only a lower bound (the run was stopped)."""
        return not self.samples and self.timed_out is not None

    def to_json(self) -> dict[str, Any]:
        return {"samples_ms": [round(s * 1e3, 4) for s in self.samples],
                "median_ms": None if self.median is None else round(self.median * 1e3, 4),
                "timed_out_after_ms": None if self.timed_out is None else round(self.timed_out * 1e3),
                "error": self.error}


def _quiet_unraisable(unraisable: Any) -> None:
    if not isinstance(unraisable.exc_value, _Timeout):
        sys.__unraisablehook__(unraisable)


def _disarm() -> None:
    """Stop the alarm (idempotent; also called after a _Timeout escaped, in case it interrupted the finally)."""
    global _armed
    _armed = False
    signal.setitimer(signal.ITIMER_REAL, 0)
    sys.unraisablehook = sys.__unraisablehook__


def _timed(fn: Callable[[], Any], timeout: float, collector: bool = True) -> tuple[float, Any]:
    # The alarm repeats every 20 ms: a _Timeout raised where C code swallows exceptions (a __del__, a
    # weakref callback) is raised again at the next tick; the swallowed ones are not printed.
    global _armed
    signal.signal(signal.SIGALRM, _alarm)
    sys.unraisablehook = _quiet_unraisable
    _armed = True
    signal.setitimer(signal.ITIMER_REAL, timeout, 0.02)
    if not collector:
        gc.disable()
    try:
        t0 = time.perf_counter()
        result = fn()
        elapsed = time.perf_counter() - t0
    finally:
        gc.enable()
        _disarm()
    return elapsed, result


def race(contestants: dict[str, Callable[[], Any]], *, repeats: int, timeout: float | dict[str, float],
         budget: float | dict[str, float], warmup: bool = True, collector: bool = True) -> dict[str, Outcome]:
    """Run each contestant ``repeats`` times, interleaved; keep the first answer of each.

    ``collector=False`` turns the cyclic garbage collector off during each timed run (as ``timeit`` does): a
    run that allocates many containers otherwise pays for full collections of the whole heap, whose number
    jumps from none to a few as the run grows, which is the interpreter's cost rather than the code's."""
    names = list(contestants)
    out = {n: Outcome() for n in names}
    done: set[str] = set()

    def limit(v: float | dict[str, float], name: str) -> float:
        return v[name] if isinstance(v, dict) else v

    # A full collection scans every live object (the SDKs' models make that about 0.3 s); objects alive now are
    # moved to the permanent generation, so the collection before each run only scans what runs left behind.
    gc.collect()
    gc.freeze()
    inner = {n: 1 for n in names}
    if warmup:  # imports, lazily built validators, caches: not what is being measured
        for n in names:
            try:
                first, res = _timed(contestants[n], limit(timeout, n))
                # a run shorter than the timer and cache noise is repeated within one sample (like timeit's
                # autorange): each sample is then at least MIN_SAMPLE seconds, reported per run
                inner[n] = max(1, min(1000, int(MIN_SAMPLE / max(first, 1e-7))))
                out[n].result, out[n].has_result = res, True
            except _Timeout:
                _disarm()
                out[n].timed_out = limit(timeout, n)
                done.add(n)
            except Exception as exc:  # a contestant that fails is reported, not fatal
                out[n].error = f"{type(exc).__name__}: {exc}"[:300]
                done.add(n)
            res = None
    for r in range(repeats):
        k = r % len(names)
        for n in names[k:] + names[:k]:
            if n in done:
                continue
            o = out[n]
            gc.collect()
            fn = contestants[n]
            k_runs = inner[n]
            run = fn if k_runs == 1 else (lambda fn=fn, k_runs=k_runs: [fn() for _ in range(k_runs)][-1])
            try:
                elapsed, res = _timed(run, limit(timeout, n) * k_runs, collector)
                elapsed /= k_runs
            except _Timeout:
                _disarm()
                if not o.samples:
                    o.timed_out = limit(timeout, n)
                done.add(n)
                continue
            except Exception as exc:
                o.error = f"{type(exc).__name__}: {exc}"[:300]
                done.add(n)
                continue
            o.samples.append(elapsed)
            if not o.has_result:
                o.result, o.has_result = res, True
            res = None
            if sum(o.samples) > limit(budget, n):
                done.add(n)
        if len(done) == len(names):
            break
    gc.collect()
    return out


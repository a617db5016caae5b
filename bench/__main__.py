"""``python -m bench [--quick]``: toolwire against a msgspec floor and the official SDKs, as ratios.

Prints one table (dialect, workload, floor ms, toolwire ms, ratio, best peer, peer ms, peer ratio), then the
linearity ratios per dialect, the memory figures, the dispatch cost (also with OpenTelemetry tracing off, no-op
and recording), and last ``bench: worst ratio to floor R
(dialect/workload)``. Writes every sample to ``bench/results.json``. See bench/README.md.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import sys
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, Callable

import toolwire
from toolwire.codecs import dialect_for

from . import dispatch, memory, otel_cost
from . import input_shapes
from . import open_calls
from . import repair as repair_bench
from .floor import FLOORS
from .peers import available_peers
from .timing import Outcome, race
from .triggers import SMALL_TARGET, two_triggers
from .workloads import DIALECTS, build, shapes

KiB = 1024
MiB = 1024 * 1024
#: toolwire / floor for the streaming workloads (``parallel``, ``large``); ``small`` has its own (``SMALL_TARGET``)
RATIO_TARGET = 1.5
LINEAR_TARGET = 11.0
REPAIR_TARGETS = {4: 5.0, 10: 11.0}  # repair_history at 4x / 10x the calls over 1x
SHAPE_TARGET = 5.0  # input shapes that were once quadratic: 4x the input within 5x the time
DISPATCH_TARGET_US = 50.0


@dataclass
class Config:
    name: str
    large: int  # bytes of arguments of the ``large`` call
    linear_base: int  # the ``large`` size compared with 10x itself
    repeats: dict[str, int]
    linear_repeats: int
    parallel_linear_repeats: int
    timeout: float  # seconds, any single run of toolwire or the floor
    budget: float  # seconds of runs of toolwire or the floor per workload, after which it is not repeated
    peer_timeout: float  # seconds, any single run of a peer
    peer_budget: float
    linear_cap: float  # seconds, the longest single run at 10x (a run stopped there gives a lower bound)
    memory_stream: int
    memory_big_call: int
    dispatch_repeats: int
    repair_calls: int  # calls at 1x of the repair line (4x and 10x beside it)
    repair_repeats: int


QUICK = Config("quick", large=64 * KiB, linear_base=32 * KiB, repeats={"small": 9, "parallel": 5, "large": 3},
               linear_repeats=3, parallel_linear_repeats=7, timeout=10.0, budget=3.0, peer_timeout=1.0,
               peer_budget=1.0, linear_cap=5.0, memory_stream=5 * MiB, memory_big_call=64 * KiB,
               dispatch_repeats=10, repair_calls=300, repair_repeats=3)
FULL = Config("full", large=1 * MiB, linear_base=1 * MiB, repeats={"small": 31, "parallel": 15, "large": 5},
              linear_repeats=3, parallel_linear_repeats=21, timeout=60.0, budget=30.0, peer_timeout=10.0,
              peer_budget=10.0, linear_cap=120.0, memory_stream=100 * MiB, memory_big_call=256 * KiB,
              dispatch_repeats=30, repair_calls=1000, repair_repeats=5)

COLS = [("dialect", 19, "<"), ("workload", 8, "<"), ("floor ms", 9, ">"), ("toolwire ms", 13, ">"),
        ("ratio", 7, ">"), ("best peer", 36, "<"), ("peer ms", 9, ">"), ("peer ratio", 10, ">")]


def _fmt_ms(seconds: float | None, lower: bool = False) -> str:
    if seconds is None:
        return "-"
    v = seconds * 1e3
    s = f"{v:.3f}" if v < 1 else f"{v:.2f}" if v < 10 else f"{v:.1f}" if v < 1000 else f"{v:.0f}"
    return (">" if lower else "") + s


def _fmt_ratio(r: float | None, lower: bool = False, target: float | None = None) -> str:
    if r is None:
        return "-"
    s = (">" if lower else "") + (f"{r:.2f}" if r < 100 else f"{r:.0f}")
    if target is not None and r > target:
        s += "*"
    return s


def _line(values: list[str]) -> str:
    return "  ".join(f"{v:{a}{w}}" for v, (_, w, a) in zip(values, COLS)).rstrip()


def _versions() -> dict[str, str]:
    out = {"python": platform.python_version(), "toolwire": getattr(toolwire, "__version__", "?")}
    for dist in ("msgspec", "structlog", "openai", "anthropic", "google-genai", "pydantic"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = "not installed"
    return out


def run_toolwire(dialect: str, chunks: list[bytes]) -> Any:
    parser = toolwire.StreamParser(dialect, format=dialect_for(dialect).codec.stream_format)
    feed = parser.feed
    for chunk in chunks:
        feed(chunk)
    parser.close()
    return parser.turn


def _turn_problem(turn: Any, expected: list[Any]) -> str | None:
    """Why toolwire's answer is wrong, or None."""
    if not turn.finished_cleanly:
        return f"turn not clean: finish={turn.finish_reason} error={turn.error and turn.error.message[:120]}"
    bad = [c for c in turn.calls if not c.runnable]
    if bad:
        c = bad[0]
        return f"call {c.local_id} not runnable: state={c.state.value} problem={c.problem and c.problem.message[:120]}"
    got = [c.args for c in turn.calls]
    if got != expected:
        return f"arguments differ from the floor's ({len(got)} calls vs {len(expected)})"
    return None


class Bench:
    def __init__(self, cfg: Config, dialects: list[str], skip_peers: bool) -> None:
        self.cfg = cfg
        self.dialects = dialects
        self.skip_peers = skip_peers
        self.rows: list[dict[str, Any]] = []
        self.problems: list[str] = []
        self.linear: dict[str, Any] = {}
        self.memory: dict[str, Any] = {}
        self.dispatch: dict[str, Any] = {}
        self.repair: dict[str, Any] = {}
        self.shapes: dict[str, Any] = {}
        self.open_calls: dict[str, Any] = {}

    # ---- the table ------------------------------------------------------------------------------------------
    def table(self) -> None:
        cfg = self.cfg
        print(_line([c for c, _, _ in COLS]))
        print(_line(["-" * w for _, w, _ in COLS]))
        for dialect in self.dialects:
            have = dialect in toolwire.PROVIDERS
            for wname, (count, size, large) in shapes(cfg.large).items():
                wl = build(dialect, wname, count=count, arg_size=size, large=large)
                truth = [c.args for c in wl.calls]
                floor = FLOORS[dialect]
                chunks = wl.chunks
                contestants: dict[str, Callable[[], Any]] = {"floor": lambda f=floor: f(chunks)}
                if have:
                    contestants["toolwire"] = lambda d=dialect: run_toolwire(d, chunks)
                peers, notes = ({}, []) if self.skip_peers else available_peers(dialect, vertex=large)
                for name, peer in peers.items():
                    contestants[name] = lambda p=peer: p(chunks)
                ours = ("floor", "toolwire")
                timeout = {n: cfg.timeout if n in ours else cfg.peer_timeout for n in contestants}
                budget = {n: cfg.budget if n in ours else cfg.peer_budget for n in contestants}
                # warm-up (imports, lazily built validators) on the first workload of each dialect only
                out = race(contestants, repeats=cfg.repeats[wname], timeout=timeout, budget=budget,
                           warmup=wname == "small")
                # small: the target allows for the two transitions triggers of its call, measured right after
                triggers = two_triggers() if have and wname == "small" else None
                self._row(dialect, wname, wl, truth, out, have, list(peers), notes, triggers)
                del wl, chunks, contestants, out
                gc.collect()

    def _row(self, dialect: str, wname: str, wl: Any, truth: list[Any], out: dict[str, Outcome], have: bool,
             peer_names: list[str], notes: list[str], triggers: float | None = None) -> None:
        where = f"{dialect}/{wname}"
        fl = out["floor"]
        if fl.error or not fl.has_result:
            self.problems.append(f"{where}: the floor failed: {fl.error or 'timed out'}")
        elif fl.result != truth:
            self.problems.append(f"{where}: the floor's arguments differ from the generated ones (bench bug)")
        floor_answer = fl.result if fl.has_result else truth
        fmed = fl.median
        row: dict[str, Any] = {"dialect": dialect, "workload": wname, "calls": len(wl.calls),
                               "arg_bytes": wl.arg_bytes, "stream_bytes": wl.stream_bytes,
                               "chunks": len(wl.chunks), "floor": fl.to_json(), "available": have,
                               "peers": {}, "notes": notes}
        tw_cell, ratio_cell = "not available", "-"
        row["ratio"] = None
        if have:
            tw = out["toolwire"]
            row["toolwire"] = tw.to_json()
            bad = None
            if tw.error:
                bad = f"toolwire raised {tw.error}"
            elif tw.has_result:
                bad = _turn_problem(tw.result, floor_answer)
            if bad:
                self.problems.append(f"{where}: toolwire's answer is wrong: {bad}")
            row["verified"] = bad is None and tw.has_result
            if tw.median is not None and fmed:
                row["ratio"] = tw.median / fmed
                row["ratio_lower_bound"] = tw.lower_bound
            target = RATIO_TARGET
            if triggers is not None and fmed:
                allowance = triggers / fmed
                target = SMALL_TARGET + allowance
                row["triggers_ms"] = round(triggers * 1e3, 5)
            row["target"] = target
            tw_cell = _fmt_ms(tw.median, tw.lower_bound) + ("!" if bad else "") if not tw.error else "error!"
            ratio_cell = _fmt_ratio(row["ratio"], tw.lower_bound, target)
        best = None
        for name in peer_names:
            o = out[name]
            entry = o.to_json()
            if o.has_result and not o.error:
                entry["verified"] = o.result == floor_answer
                if not entry["verified"]:
                    self.problems.append(f"{where}: peer {name} assembled different arguments")
            elif o.error:
                self.problems.append(f"{where}: peer {name} failed: {o.error}")
            else:
                entry["verified"] = None  # stopped before it finished once
            row["peers"][name] = entry
            if o.median is not None and not o.error and (best is None or o.median < out[best].median):
                best = name
        peer_cells = ["-", "-", "-"]
        if best is not None:
            o = out[best]
            pr = o.median / fmed if fmed else None
            row["best_peer"] = best
            row["peer_ratio"] = pr
            peer_cells = [best, _fmt_ms(o.median, o.lower_bound), _fmt_ratio(pr, o.lower_bound)]
        elif notes:
            peer_cells = ["(" + "; ".join(notes)[:34] + ")", "-", "-"]
        self.rows.append(row)
        print(_line([dialect, wname, _fmt_ms(fmed, fl.lower_bound), tw_cell, ratio_cell] + peer_cells), flush=True)
        if "triggers_ms" in row:
            r, missed = row["ratio"], row["ratio"] is not None and row["ratio"] > row["target"]
            print(f"{'':19}  {'':8}  ratio {_fmt_ratio(r, row.get('ratio_lower_bound', False))} (target <= "
                  f"{SMALL_TARGET:g} + {row['target'] - SMALL_TARGET:.2f} for 2 transitions triggers, "
                  f"{row['triggers_ms'] * 1e3:.1f} us)" + ("  * miss" if missed else ""), flush=True)

    # ---- linearity ------------------------------------------------------------------------------------------
    def linearity(self) -> None:
        cfg = self.cfg
        base = cfg.linear_base
        print()
        print(f"linear: toolwire at 10x the size over 1x, median of interleaved repeats (target <= {LINEAR_TARGET:g}x;"
              " the floor's own ratio alongside)")
        head = f"  {'dialect':19}  {'large ' + _size(base) + ' -> ' + _size(10 * base):>34}  {'parallel 8 -> 80 calls':>34}"
        print(head)
        for dialect in self.dialects:
            if dialect not in toolwire.PROVIDERS:
                print(f"  {dialect:19}  {'not available':>34}  {'not available':>34}")
                continue
            res: dict[str, Any] = {}
            cells = []
            for kind, (c1, c10, size, large, reps) in {
                    "large": (1, 1, base, True, cfg.linear_repeats),
                    "parallel": (8, 80, 2048, False, cfg.parallel_linear_repeats)}.items():
                w1 = build(dialect, kind, count=c1, arg_size=size, large=large)
                w10 = build(dialect, kind, count=c10, arg_size=size * (10 if large else 1), large=large)
                ch1, ch10 = w1.chunks, w10.chunks
                truth10 = [c.args for c in w10.calls]
                f = FLOORS[dialect]
                contestants = {"toolwire@1x": lambda: run_toolwire(dialect, ch1),
                               "toolwire@10x": lambda: run_toolwire(dialect, ch10),
                               "floor@1x": lambda: f(ch1), "floor@10x": lambda: f(ch10)}
                # a run at 10x may take 3 x 11 times the 1x run, within the cap; beyond, it is stopped and
                # its ratio is a lower bound
                t0 = time.perf_counter()
                run_toolwire(dialect, ch1)
                est = time.perf_counter() - t0
                timeout = {"toolwire@1x": cfg.timeout, "floor@1x": cfg.timeout,
                           "toolwire@10x": min(cfg.linear_cap, max(2.0, 33 * est)), "floor@10x": cfg.linear_cap}
                out = race(contestants, repeats=reps, timeout=timeout, budget=cfg.budget * 3, warmup=False)
                t1, t10 = out["toolwire@1x"], out["toolwire@10x"]
                if t10.has_result and not t10.error:
                    bad = _turn_problem(t10.result, truth10)
                    if bad:
                        self.problems.append(f"{dialect}/{kind} x10: toolwire's answer is wrong: {bad}")
                for o in out.values():
                    if o.error:
                        self.problems.append(f"{dialect}/{kind} linear: {o.error}")
                ratio = t10.median / t1.median if t10.median and t1.median else None
                fratio = (out["floor@10x"].median / out["floor@1x"].median
                          if out["floor@10x"].median and out["floor@1x"].median else None)
                res[kind] = {"ratio": ratio, "ratio_lower_bound": t10.lower_bound, "floor_ratio": fratio,
                             "sizes": [w1.arg_bytes, w10.arg_bytes], "calls": [c1, c10],
                             **{k: o.to_json() for k, o in out.items()}}
                cells.append(f"{_fmt_ratio(ratio, t10.lower_bound, LINEAR_TARGET)} "
                             f"({_fmt_ms(t1.median)} -> {_fmt_ms(t10.median, t10.lower_bound)} ms; "
                             f"floor {_fmt_ratio(fratio)})")
                del w1, w10, ch1, ch10, contestants, out, t1, t10
                gc.collect()
            self.linear[dialect] = res
            print(f"  {dialect:19}  {cells[0]:>34}  {cells[1]:>34}", flush=True)

    # ---- history repair -------------------------------------------------------------------------------------
    def repair_step(self) -> None:
        cfg = self.cfg
        n = cfg.repair_calls
        print()
        print(f"repair: repair_history at 4x and 10x the calls over 1x ({n} -> {4 * n} -> {10 * n}), median of "
              f"interleaved repeats with the garbage collector off in each run (targets <= {REPAIR_TARGETS[4]:g}x "
              f"and <= {REPAIR_TARGETS[10]:g}x; the 10x ratio of decoding the history's JSON again alongside; "
              f"'gc on': the 10x ratios of repair and floor with the collector on)")
        print(f"  {'dialect':19}  {'one turn of N calls':>66}  {'N turns reusing call_0':>66}")
        for dialect in self.dialects:
            res: dict[str, Any] = {}
            cells = []
            for shape in repair_bench.SHAPES:
                r = repair_bench.measure(dialect, shape, n, cfg.repair_repeats, timeout=cfg.linear_cap)
                res[shape] = r
                if r["problem"]:
                    self.problems.append(f"repair/{dialect}/{shape}: {r['problem']}")
                    cells.append(f"n/a ({r['problem']})")
                    continue
                on = repair_bench.measure(dialect, shape, n, cfg.repair_repeats, timeout=cfg.linear_cap,
                                          scales=(1, 10), collector=True)
                res[shape + "_gc_on"] = on
                ms, ratio, lower = r["median_ms"], r["ratio"], r["lower_bound"]
                cells.append(f"{_fmt_ratio(ratio[4], lower[4], REPAIR_TARGETS[4])} "
                             f"{_fmt_ratio(ratio[10], lower[10], REPAIR_TARGETS[10])} "
                             f"({_fmt_ms(ms[1] and ms[1] / 1e3)} -> {_fmt_ms(ms[10] and ms[10] / 1e3, lower[10])} ms;"
                             f" floor {_fmt_ratio(r['floor_ratio'])}; gc on {_fmt_ratio(on['ratio'].get(10))}"
                             f"/{_fmt_ratio(on['floor_ratio'])})")
                gc.collect()
            self.repair[dialect] = res
            print(f"  {dialect:19}  {cells[0]:>66}  {cells[1]:>66}", flush=True)

    # ---- input shapes that once cost more than linear time ---------------------------------------------------
    def shapes_step(self) -> None:
        n = 20_000 if self.cfg.name == "quick" else 100_000
        print()
        print(f"shapes: parse time at 4x the input over 1x (n = {n}; target <= {SHAPE_TARGET:g}x), 64-byte pieces")
        for shape in input_shapes.SHAPES:
            r = input_shapes.measure(shape, n, 3 if self.cfg.name == "quick" else 5)
            self.shapes[shape] = r
            flag = "" if r["ratio"] <= SHAPE_TARGET else "*"
            print(f"  {shape:20} {r['s_1x'] * 1e3:9.1f} ms -> {r['s_4x'] * 1e3:9.1f} ms  ratio {r['ratio']:.2f}{flag}"
                  + ("" if r["ok"] else "  [wrong: the parse failed]"), flush=True)
            if not r["ok"]:
                self.problems.append(f"shapes/{shape}: the parse failed")

    # ---- many calls open at once, many choices ---------------------------------------------------------------
    def open_calls_step(self) -> None:
        n = 500 if self.cfg.name == "quick" else 2000
        reps = 3 if self.cfg.name == "quick" else 5
        print()
        print(f"open calls: parse time at 4x the calls open at once (or choices) over 1x ({n} -> {4 * n}), one "
              f"event per feed(), median of interleaved repeats with the garbage collector off in each run "
              f"(target <= {open_calls.TARGET:g}x)")
        for dialect in self.dialects:
            if dialect not in toolwire.PROVIDERS:
                continue
            for shape in open_calls.DIALECT_SHAPES.get(dialect, ()):
                r = open_calls.measure(dialect, shape, n, reps, timeout=self.cfg.linear_cap)
                self.open_calls[f"{dialect}/{shape}"] = r
                print("  " + open_calls.line(dialect, shape, r), flush=True)
                if r["problem"]:
                    self.problems.append(f"open_calls/{dialect}/{shape}: {r['problem']}")
                gc.collect()

    # ---- memory and dispatch --------------------------------------------------------------------------------
    def memory_step(self) -> None:
        cfg = self.cfg
        print()
        if "openai-chat" not in toolwire.PROVIDERS:
            print("memory: not measured (openai-chat not available)")
            return
        for dialect in ("anthropic", "openai-chat"):
            m = memory.many_calls(cfg.memory_stream, big_call=cfg.memory_big_call, dialect=dialect)
            self.memory[f"many_calls/{dialect}"] = m
            mode = "keep_calls=False" if m["keep_calls"] is False else "default mode, no keep_calls yet"
            note = "" if dialect == "anthropic" else " (Chat holds every call until finish_reason)"
            print(f"memory: {_size(m['stream_bytes'])} {dialect} stream of {m['calls']} calls ({mode}), largest "
                  f"call {_size(m['largest_call_bytes'])}: peak {m['peak_bytes'] / MiB:.1f} MiB traced "
                  f"(stream generator alone {m['generator_peak_bytes'] / MiB:.1f} MiB) = "
                  f"{m['peak_over_largest_call']:.1f}x the largest call{note}"
                  + ("" if m["ok"] else f"  [wrong: {m['completed_events']} completed of {m['calls']}, "
                                        f"error {m['error']}]"))
            if not m["ok"]:
                self.problems.append(f"memory/many_calls/{dialect}: toolwire did not complete every call")
        n = memory.no_boundary(100 * MiB)
        self.memory["no_boundary"] = n
        if n["ok"]:
            print(f"memory: 'data: ' + endless bytes in 64 KiB chunks: FramingError after {_size(n['stopped_after_bytes'])}"
                  f" fed (cap {_size(n['limit'] or 0)}), peak {n['peak_bytes'] / MiB:.1f} MiB traced")
        else:
            print(f"memory: 'data: ' + endless bytes: NO FramingError after {_size(n['stopped_after_bytes'])}, "
                  f"peak {n['peak_bytes'] / MiB:.1f} MiB traced")
            self.problems.append("memory/no_boundary: no FramingError")

    def dispatch_step(self) -> None:
        if not dispatch.available():
            print("dispatch: not measured (no dispatcher yet)")
            self.dispatch = {"measured": False}
            return
        try:
            d = dispatch.measure(self.cfg.dispatch_repeats)
        except Exception as exc:  # the registry is being written: report, do not fail the bench
            print(f"dispatch: not measured ({type(exc).__name__}: {str(exc)[:120]})")
            self.dispatch = {"measured": False, "error": f"{type(exc).__name__}: {exc}"}
            return
        self.dispatch = {"measured": True, **d}
        med = d["default"]["us_per_call_median"]
        extra = f"; concurrent_reads=False: {d['sequential']['us_per_call_median']:.1f} us" if "sequential" in d else ""
        if "no_timeout" in d:
            extra += f"; a tool with timeout=None, sequential: {d['no_timeout']['us_per_call_median']:.1f} us"
        flag = "" if med <= DISPATCH_TARGET_US else f"  * over the {DISPATCH_TARGET_US:g} us target"
        print(f"dispatch: {med:.1f} us per call median (Dispatcher(registry).run on a turn of {dispatch.N_CALLS} "
              f"trivial read calls{extra}){flag}")
        self.otel_step()

    def otel_step(self) -> None:
        if not otel_cost.available():
            print("otel: not measured (opentelemetry-sdk is not installed)")
            self.dispatch["otel"] = {"measured": False}
            return
        try:
            m = otel_cost.measure(self.cfg.dispatch_repeats)
        except Exception as exc:  # report, do not fail the bench
            print(f"otel: not measured ({type(exc).__name__}: {str(exc)[:120]})")
            self.dispatch["otel"] = {"measured": False, "error": f"{type(exc).__name__}: {exc}"}
            self.problems.append(f"otel: {type(exc).__name__}: {str(exc)[:120]}")
            return
        self.dispatch["otel"] = {"measured": True, **m}
        print(otel_cost.line(m))

    # ---- summary --------------------------------------------------------------------------------------------
    def targets(self) -> str:
        """How many rows met their ratio target, and by how much each other one missed it."""
        rated = [r for r in self.rows if r.get("ratio") is not None and r.get("target")]
        missed = [r for r in rated if r["ratio"] > r["target"]]
        line = f"targets: {len(rated) - len(missed)} of {len(rated)} rows met"
        if missed:
            line += "; missed by " + ", ".join(
                f"{r['dialect']}/{r['workload']} {r['ratio']:.2f} vs {r['target']:.2f} "
                f"(+{(r['ratio'] / r['target'] - 1) * 100:.0f}%)" for r in missed)
        if self.dispatch.get("measured"):
            med = self.dispatch["default"]["us_per_call_median"]
            line += (f"; dispatch {med:.1f} us vs {DISPATCH_TARGET_US:g} us "
                     + ("(met)" if med <= DISPATCH_TARGET_US else f"(+{(med / DISPATCH_TARGET_US - 1) * 100:.0f}%)"))
        return line

    def worst(self) -> str:
        rated = [r for r in self.rows if r.get("ratio") is not None]
        if not rated:
            return "bench: worst ratio to floor - (no dialect available)"
        w = max(rated, key=lambda r: r["ratio"])
        return (f"bench: worst ratio to floor {_fmt_ratio(w['ratio'], w.get('ratio_lower_bound', False))} "
                f"({w['dialect']}/{w['workload']})")


def _size(n: int) -> str:
    if n >= MiB:
        return f"{n / MiB:.1f} MiB"
    if n >= KiB:
        return f"{n / KiB:.0f} KiB"
    return f"{n} B"


def _profile(spec: str, cfg: Config) -> None:
    import cProfile
    import pstats

    dialect, _, wname = spec.partition("/")
    count, size, large = shapes(cfg.large)[wname or "large"]
    wl = build(dialect, wname or "large", count=count, arg_size=size, large=large)
    t0 = time.perf_counter()
    run_toolwire(dialect, wl.chunks)
    n = max(1, int(1.0 / max(1e-6, time.perf_counter() - t0)))  # about a second of runs
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(n):
        run_toolwire(dialect, wl.chunks)
    prof.disable()
    print(f"toolwire on {dialect}/{wname or 'large'}, {n} runs")
    pstats.Stats(prof).sort_stats("tottime").print_stats(25)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer repeats and smaller sizes (under about a minute)")
    ap.add_argument("--dialect", action="append", choices=DIALECTS, help="only this dialect (repeatable)")
    ap.add_argument("--skip-peers", action="store_true", help="do not run the SDK peers")
    ap.add_argument("--skip-memory", action="store_true", help="skip the tracemalloc step")
    ap.add_argument("--skip-linear", action="store_true", help="skip the 10x linearity step")
    ap.add_argument("--skip-repair", action="store_true", help="skip the history repair scaling step")
    ap.add_argument("--skip-open-calls", action="store_true",
                    help="skip the many-open-calls and many-choices scaling step")
    ap.add_argument("--only-open-calls", action="store_true",
                    help="run only the many-open-calls and many-choices scaling step")
    ap.add_argument("--skip-workers", action="store_true",
                    help="skip conversations per second on 1-8 DBOS workers (needs dbos and PostgreSQL)")
    ap.add_argument("--output", default=str(Path(__file__).with_name("results.json")),
                    help="where to write the JSON results (default bench/results.json)")
    ap.add_argument("--profile", metavar="DIALECT/WORKLOAD",
                    help="only profile toolwire on one workload with cProfile (e.g. gemini/large)")
    args = ap.parse_args(argv)
    cfg = QUICK if args.quick else FULL
    if args.profile:
        _profile(args.profile, cfg)
        return 0
    dialects = args.dialect or list(DIALECTS)
    started = time.perf_counter()
    v = _versions()
    print(f"toolwire bench ({cfg.name}): python {v['python']}, toolwire {v['toolwire']}, msgspec {v['msgspec']}, "
          f"openai {v['openai']}, anthropic {v['anthropic']}, google-genai {v['google-genai']}; "
          f"{os.cpu_count()} cpus, load {os.getloadavg()[0]:.1f}")
    print(f"workloads: small = 1 call, 200 B of arguments; parallel = 8 calls x 2 KiB; large = 1 call, "
          f"{_size(cfg.large)} in 4-8 byte fragments; chunks of 1-4 KiB; medians of "
          f"{cfg.repeats['small']}/{cfg.repeats['parallel']}/{cfg.repeats['large']} interleaved repeats; "
          f"ratio = toolwire / floor (* over {RATIO_TARGET:g}x; small: over {SMALL_TARGET:g}x plus 2 transitions triggers); peer runs stopped after {cfg.peer_timeout:g} s (>)")
    print()
    bench = Bench(cfg, dialects, args.skip_peers)
    if args.only_open_calls:
        bench.open_calls_step()
        for p in bench.problems:
            print(f"problem: {p}")
        return 1 if bench.problems else 0
    bench.table()
    if not args.skip_linear:
        bench.linearity()
    if not args.skip_repair:
        bench.repair_step()
    if not args.skip_linear:
        bench.shapes_step()
    if not args.skip_open_calls:
        bench.open_calls_step()
    if not args.skip_memory:
        bench.memory_step()
    else:
        print()
    bench.dispatch_step()
    if not args.skip_memory:
        from . import ledger_rate

        lr = ledger_rate.rates(500 if cfg.name == "quick" else 2000)
        bench.memory["ledger_claims_per_s"] = lr
        print("ledger: claims (each completed) per second, one thread (test PostgreSQL: fsync off): "
              + ", ".join(f"{k} {v:,.0f}" if isinstance(v, float) else f"{k} {v}" for k, v in lr.items()))
    if not args.skip_workers:
        from . import workers_rate

        wr = workers_rate.rates(rounds=1 if cfg.name == "quick" else 3)
        bench.memory["workers_conversations_per_s"] = wr
        print(workers_rate.line(wr))
    if bench.problems:
        print()
        for p in bench.problems:
            print(f"problem: {p}")
    elapsed = time.perf_counter() - started
    results = {"config": cfg.__dict__, "versions": v, "cpus": os.cpu_count(), "elapsed_s": round(elapsed, 1),
               "loadavg_end": os.getloadavg(), "rows": bench.rows, "linear": bench.linear, "memory": bench.memory,
               "shapes": bench.shapes, "open_calls": bench.open_calls,
               "repair": bench.repair, "dispatch": bench.dispatch, "problems": bench.problems,
               "summary": bench.worst(), "targets": bench.targets(),
               "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    try:
        Path(args.output).write_text(json.dumps(results, indent=1, default=str) + "\n")
        print(f"(results in {args.output}; {elapsed:.0f} s)")
    except OSError as exc:
        print(f"(could not write {args.output}: {exc})")
    print(bench.targets())
    print(bench.worst())
    return 1 if bench.problems else 0


if __name__ == "__main__":
    sys.exit(main())

"""The fuzz loop: build cases from seeds and mutations, check them on worker processes, keep one case per distinct
failure, shrink it, write reproducers, and report.

Input number ``i`` of a run with seed ``S`` is always the same case (its dialect is ``dialects[i % n]``, every
other choice comes from ``random.Random`` seeded with ``S`` and ``i``), so a run with ``--inputs`` is deterministic
whatever ``--jobs`` is, and a failure can be found again from its seed and number.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import multiprocessing as mp
import random
import signal
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from .corpus import DIALECTS, Seed, load_seeds
from .minimize import minimize
from .mutators import BIG_MUTATIONS, Doc, Pool, mutate
from .properties import Case, Failure, check, innermost_toolwire_frame

__all__ = ["Generator", "Report", "Finding", "run", "replay", "write_finding", "DEFAULT_OUT", "check_one"]

DEFAULT_OUT = Path(__file__).resolve().parent / "findings"
FORMATS = ("sse", "jsonl", "json", "auto")
BATCH = 64
MEMORY_LIMIT = 3 * 1024 ** 3  # address space of a worker process: a runaway allocation is a MemoryError


class Generator:
    """Case ``i`` of a run: a seed of dialect ``dialects[i % n]``, mutated, and how to check it."""

    def __init__(self, seed: int, dialects: tuple[str, ...] = DIALECTS,
                 seeds: dict[str, list[Seed]] | None = None) -> None:
        self.seed = seed
        self.dialects = tuple(dialects)
        self.seeds = seeds if seeds is not None else load_seeds(self.dialects)
        self.pools = {d: Pool.build(d, self.seeds[d], random.Random(f"pool:{d}")) for d in self.dialects}
        # smaller seeds are picked more often (weight 1/sqrt(size)): the same coverage for less parsing
        self.weights = {d: list(itertools.accumulate(1.0 / math.sqrt(len(s.data) + 256) for s in self.seeds[d]))
                        for d in self.dialects}

    def case(self, i: int) -> Case:
        rng = random.Random(self.seed * 1_000_003 + i)
        dialect = self.dialects[i % len(self.dialects)]
        seed = rng.choices(self.seeds[dialect], cum_weights=self.weights[dialect])[0]
        if rng.random() < 0.97:
            m = mutate(seed.data, seed.format, dialect, rng, self.pools[dialect])
            data, names, doc = m.data, m.names, m.doc
        else:
            data, names, doc = seed.data, [], Doc.parse(seed.data, seed.format)
        fmt = seed.format if rng.random() < 0.6 else "auto"
        other = None
        r = rng.random()
        if r < 0.25:
            other = "auto" if fmt != "auto" else seed.format
        elif r < 0.3:
            other = rng.choice(FORMATS)
        big = any(n in BIG_MUTATIONS for n in names)
        return Case(
            dialect=dialect, data=data, fmt=fmt,
            chunk_seed=rng.randrange(1 << 30),
            chunk_max=64 if len(data) <= 65536 else 64 * math.ceil(len(data) / 65536),
            keep_calls_chunked=rng.random() < 0.5,
            other_fmt=other,
            dispatch=True,
            concurrent=rng.random() < 0.1,
            threaded=rng.random() < 0.05,
            echo=rng.random() < 0.25,
            rerun=rng.random() < 0.2,
            cut_format=seed.format if doc is not None else None,
            memory=(big and rng.random() < 0.1) or rng.random() < 0.001,
            logging=rng.random() < 0.05,
            seed=seed.name,
            mutations=names,
        )


# ---- hang guard ---------------------------------------------------------------------------------------------
class Hang(BaseException):
    """Raised by the alarm when one input takes longer than ``hang_seconds``."""


def _on_alarm(signum: int, frame: Any) -> None:
    raise Hang()


def check_one(case: Case, hang_seconds: float | None = None) -> list[Failure]:
    """``check(case)`` under the hang guard (main thread only; elsewhere without it)."""
    import threading

    if not hang_seconds or threading.current_thread() is not threading.main_thread():
        return check(case)
    old = signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, hang_seconds)
    try:
        return check(case)
    except Hang as exc:
        return [Failure("hang", "check", "Hang", f"one input took more than {hang_seconds:g} s",
                        innermost_toolwire_frame(exc), case.dialect)]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


# ---- batches ------------------------------------------------------------------------------------------------
@dataclass
class Finding:
    """One distinct failure: the first (smallest) case that showed it, and how often it was seen."""

    failure: Failure
    case: Case
    index: int
    hits: int = 1
    dialects: Counter = field(default_factory=Counter)
    path: Path | None = None

    @property
    def key(self) -> str:
        return self.failure.key


@dataclass
class _BatchResult:
    counts: Counter
    findings: dict[str, Finding]
    cpu: float = 0.0


def _better(a: Finding, b: Finding) -> bool:
    """True when ``a`` is the case to keep rather than ``b``: smaller input, then earlier input number."""
    return (len(a.case.data), a.index) < (len(b.case.data), b.index)


def _merge(into: dict[str, Finding], key: str, new: Finding) -> None:
    old = into.get(key)
    if old is None:
        into[key] = new
        return
    hits = old.hits + new.hits
    dialects = old.dialects + new.dialects
    keep = new if _better(new, old) else old
    keep.hits, keep.dialects = hits, dialects
    into[key] = keep


_GEN: Generator | None = None
_HANG: float | None = None


def _init_worker(seed: int, dialects: tuple[str, ...], hang: float | None, limit_memory: bool) -> None:
    global _GEN, _HANG
    if limit_memory:
        try:
            import resource

            soft, hard = resource.getrlimit(resource.RLIMIT_AS)
            cap = MEMORY_LIMIT if hard == resource.RLIM_INFINITY else min(MEMORY_LIMIT, hard)
            resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
        except (ImportError, ValueError, OSError):
            pass
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop
    _GEN = Generator(seed, dialects)
    _HANG = hang


def _run_batch(start: int, count: int) -> _BatchResult:
    gen = _GEN
    assert gen is not None
    counts: Counter = Counter()
    findings: dict[str, Finding] = {}
    cpu = time.process_time()
    for i in range(start, start + count):
        case = gen.case(i)
        counts[case.dialect] += 1
        for f in check_one(case, _HANG):
            _merge(findings, f.key, Finding(f, case, i, 1, Counter({case.dialect: 1})))
    return _BatchResult(counts, findings, time.process_time() - cpu)


def _minimize_one(args: tuple[Finding, int]) -> Finding:
    finding, max_checks = args
    small = minimize(finding.case, finding.key, max_checks=max_checks)
    found = [f for f in check(small) if f.key == finding.key]
    if found:
        finding.case = small
        finding.failure = found[0]
    return finding


# ---- the run ------------------------------------------------------------------------------------------------
@dataclass
class Report:
    counts: Counter
    findings: list[Finding]
    seconds: float
    seed: int
    jobs: int
    cpu: float = 0.0  # CPU seconds the checks took, over every process

    @property
    def inputs(self) -> int:
        return sum(self.counts.values())

    @property
    def rate(self) -> float:
        return self.inputs / self.seconds if self.seconds > 0 else 0.0

    @property
    def cpu_rate(self) -> float:
        """Inputs per CPU second (what one uncontended core does)."""
        return self.inputs / self.cpu if self.cpu > 0 else 0.0


def run(*, seconds: float | None = None, inputs: int | None = None, seed: int = 0,
        dialects: tuple[str, ...] | list[str] = DIALECTS, jobs: int = 2, out: Path | str | None = DEFAULT_OUT,
        minimize_checks: int = 600, hang_seconds: float | None = 30.0, start: int = 0,
        log: Callable[[str], None] | None = None) -> Report:
    """Fuzz for ``seconds`` or ``inputs`` (one of them; neither: 10,000 inputs) and return the report.

    ``jobs`` <= 1 runs in this process (no pool). Findings are shrunk with at most ``minimize_checks`` checks
    each (0: not shrunk) and written to ``out`` (None: not written).
    """
    dialects = tuple(dialects)
    for d in dialects:
        if d not in DIALECTS:
            raise ValueError(f"unknown dialect {d!r}; expected some of: {', '.join(DIALECTS)}")
    if seconds is None and inputs is None:
        inputs = 10_000
    say = log or (lambda s: None)
    t0 = time.perf_counter()
    counts: Counter = Counter()
    found: dict[str, Finding] = {}
    cpu = [0.0]
    deadline = None if seconds is None else t0 + seconds
    end = None if inputs is None else start + inputs

    def take(res: _BatchResult) -> None:
        counts.update(res.counts)
        cpu[0] += res.cpu
        for key, f in res.findings.items():
            new = key not in found
            _merge(found, key, f)
            if new:
                say(f"fuzz: new failure after {sum(counts.values())} inputs: {key}")

    def batches():
        i = start
        while (end is None or i < end) and (deadline is None or time.perf_counter() < deadline):
            n = BATCH if end is None else min(BATCH, end - i)
            yield i, n
            i += n

    last_note = time.perf_counter()

    def progress() -> None:
        nonlocal last_note
        now = time.perf_counter()
        if now - last_note >= 30:
            last_note = now
            n = sum(counts.values())
            say(f"fuzz: {n} inputs, {len(found)} distinct failures, {n / (now - t0):.0f} inputs/s")

    if jobs <= 1:
        global _GEN, _HANG
        _GEN, _HANG = Generator(seed, dialects), hang_seconds
        try:
            for i, n in batches():
                take(_run_batch(i, n))
                progress()
            fuzz_seconds = time.perf_counter() - t0
            findings = list(found.values())
            if minimize_checks > 0:
                findings = [_minimize_one((f, minimize_checks)) for f in findings]
        finally:
            _GEN = None
    else:
        ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else mp.get_context()
        with ctx.Pool(jobs, initializer=_init_worker, initargs=(seed, dialects, hang_seconds, True)) as pool:
            pending = []
            it = batches()
            exhausted = False
            while True:
                while not exhausted and len(pending) < jobs * 3:
                    try:
                        i, n = next(it)
                    except StopIteration:
                        exhausted = True
                        break
                    pending.append(pool.apply_async(_run_batch, (i, n)))
                if not pending:
                    break
                pending[0].wait()
                done = [p for p in pending if p.ready()]
                pending = [p for p in pending if not p.ready()]
                for p in done:
                    take(p.get())
                progress()
            fuzz_seconds = time.perf_counter() - t0
            findings = list(found.values())
            if minimize_checks > 0 and findings:
                say(f"fuzz: shrinking {len(findings)} failure(s)")
                findings = pool.map(_minimize_one, [(f, minimize_checks) for f in findings], chunksize=1)
    findings.sort(key=lambda f: (f.failure.prop, f.key))
    if out is not None:
        for f in findings:
            write_finding(f, Path(out), seed)
    return Report(counts, findings, fuzz_seconds, seed, jobs, cpu[0])


# ---- reproducers --------------------------------------------------------------------------------------------
def _slug(key: str) -> str:
    prop = key.split("|", 1)[0]
    return f"{prop}-{hashlib.sha256(key.encode()).hexdigest()[:10]}"


def write_finding(f: Finding, out: Path, seed: int | None = None) -> Path:
    """Write ``f``'s reproducer: ``<slug>.json`` (everything replay needs) and ``<slug>.bin`` (the raw input)."""
    out.mkdir(parents=True, exist_ok=True)
    slug = _slug(f.key)
    path = out / f"{slug}.json"
    doc = {
        "key": f.key,
        "failure": {"prop": f.failure.prop, "stage": f.failure.stage, "type": f.failure.type,
                    "message": f.failure.message, "where": f.failure.where, "dialect": f.failure.dialect},
        "hits": f.hits,
        "dialects": dict(f.dialects),
        "run_seed": seed,
        "input_number": f.index,
        "case": f.case.to_json(),
        "replay": f"python -m fuzz --replay {path}",
    }
    path.write_text(json.dumps(doc, indent=1, ensure_ascii=True) + "\n")
    (out / f"{slug}.bin").write_bytes(f.case.data)
    f.path = path
    return path


def load_case(path: Path | str) -> tuple[Case, str | None]:
    doc = json.loads(Path(path).read_text())
    return Case.from_json(doc["case"]), doc.get("key")


def replay(path: Path | str) -> tuple[list[Failure], str | None]:
    """Check the case stored in a reproducer file again: (the failures now, the key it was written for)."""
    case, key = load_case(path)
    return check(case), key


def describe_case(case: Case, limit: int = 120) -> str:
    text = case.data[:limit].decode("utf-8", "backslashreplace").replace("\n", "\\n").replace("\r", "\\r")
    more = "…" if len(case.data) > limit else ""
    chunks = "whole" if case.pieces and len(case.pieces) == 1 else "in pieces"
    mode = "" if case.keep_calls_chunked else ", keep_calls=False"
    return (f"{case.dialect} format={case.fmt}, {len(case.data)} bytes fed {chunks}{mode}"
            f"{', dispatched' if case.dispatch else ''} (seed {case.seed}; {'+'.join(case.mutations) or 'unmutated'})"
            f": {text}{more}")


def format_report(report: Report, out: Path | None) -> list[str]:
    lines = [f"fuzz: seed {report.seed}, {report.jobs} job(s), {report.seconds:.1f} s, "
             f"{report.rate:.0f} inputs/s" + (f" ({report.cpu_rate:.0f} per CPU second)" if report.cpu else "")]
    for d in sorted(report.counts):
        lines.append(f"  {d}: {report.counts[d]} inputs")
    for n, f in enumerate(report.findings, 1):
        fl = f.failure
        lines.append(f"[{n}] {fl.prop} ({fl.stage}): {fl.type}: {fl.message}")
        lines.append(f"    where: {fl.where}; seen {f.hits} time(s) in {', '.join(sorted(f.dialects))}")
        lines.append(f"    input: {describe_case(f.case)}")
        if f.path is not None:
            lines.append(f"    replay: python -m fuzz --replay {f.path}")
    lines.append(f"fuzz: {report.inputs} inputs, {len(report.findings)} distinct failures")
    return lines

"""Optional coverage-guided mode: ``python -m fuzz --atheris --seconds N`` (needs ``pip install atheris``).

libFuzzer (through atheris) drives the same ``check``: each input's first bytes choose the dialect, the format
and how it is checked, the rest is the response; toolwire is instrumented for coverage, and the mutator mixes
libFuzzer's byte mutations with this package's event- and JSON-level ones. Each of ``--jobs`` child processes
runs libFuzzer for ``--seconds``, starting from the same seeds, and writes every new distinct failure to
``--out`` as it is found (shrunk with a small budget); the parent collects them and reports as the random mode
does. A child never stops at a failure.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable

__all__ = ["run_atheris", "encode_input", "decode_input"]

_FORMATS = ("sse", "jsonl", "json", "auto")
_HEADER = 6


def encode_input(dialect_index: int, fmt_index: int, flags: int, chunk_seed: int, data: bytes) -> bytes:
    """The fuzzer's input layout: dialect, format, flags, 3 bytes of chunk seed, then the response bytes."""
    return (bytes([dialect_index & 0xff, fmt_index & 0xff, flags & 0xff]) + (chunk_seed & 0xffffff).to_bytes(3, "big")
            + data)


def decode_input(buf: bytes, dialects: tuple[str, ...]) -> Any:
    from .properties import Case

    if len(buf) < _HEADER:
        buf = buf + bytes(_HEADER - len(buf))
    dialect = dialects[buf[0] % len(dialects)]
    fmt = _FORMATS[buf[1] % len(_FORMATS)]
    flags = buf[2]
    data = buf[_HEADER:]
    return Case(dialect=dialect, data=data, fmt=fmt, chunk_seed=int.from_bytes(buf[3:6], "big"),
                chunk_max=64 if len(data) <= 65536 else 64 * (len(data) // 65536 + 1),
                keep_calls_chunked=not flags & 1, echo=bool(flags & 2), rerun=bool(flags & 4),
                concurrent=bool(flags & 8), logging=bool(flags & 16),
                cut_format=fmt if fmt != "auto" else None, seed="atheris")


# ---- the child: runs libFuzzer --------------------------------------------------------------------------------
def _child(argv: list[str]) -> None:
    import argparse

    import atheris

    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--work", type=Path, required=True)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--dialect", action="append", required=True)
    args = p.parse_args(argv)

    with atheris.instrument_imports(include=["toolwire"]):
        import toolwire  # noqa: F401 - instrumented before anything else imports it

    import random

    from .corpus import load_seeds
    from .minimize import minimize
    from .mutators import Pool, mutate
    from .properties import check
    from .runner import Finding, write_finding

    dialects = tuple(args.dialect)
    seeds = load_seeds(dialects)
    pools = {d: Pool.build(d, seeds[d], random.Random(f"pool:{d}")) for d in dialects}
    corpus = args.work / "corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    for di, d in enumerate(dialects):
        for k, s in enumerate(seeds[d]):
            fi = _FORMATS.index(s.format)
            (corpus / f"seed-{di}-{k}").write_bytes(encode_input(di, fi, 0, k, s.data))
    stats_path = args.out / f"atheris-stats-{os.getpid()}.json"
    counts: Counter = Counter()
    seen: set[str] = set()
    state = {"last": time.monotonic(), "n": 0}

    def save_stats() -> None:
        stats_path.write_text(json.dumps({"counts": dict(counts), "keys": sorted(seen)}))

    def one(buf: bytes) -> None:
        case = decode_input(buf, dialects)
        counts[case.dialect] += 1
        state["n"] += 1
        for f in check(case):
            if f.key in seen:
                continue
            seen.add(f.key)
            small = minimize(case, f.key, max_checks=200)
            again = [g for g in check(small) if g.key == f.key]
            write_finding(Finding(again[0] if again else f, small if again else case, state["n"], 1,
                                  Counter({case.dialect: 1})), args.out, args.seed)
            save_stats()
        now = time.monotonic()
        if now - state["last"] > 1.0:
            state["last"] = now
            save_stats()

    def mutator(buf: bytes, max_size: int, seed: int) -> bytes:
        rng = random.Random(seed)
        if len(buf) < _HEADER or rng.random() < 0.4:
            return atheris.Mutate(buf, max_size)
        head, data = bytearray(buf[:_HEADER]), buf[_HEADER:]
        if rng.random() < 0.1:
            head[rng.randrange(_HEADER)] = rng.randrange(256)
        dialect = dialects[head[0] % len(dialects)]
        fmt = _FORMATS[head[1] % len(_FORMATS)]
        m = mutate(data, fmt if fmt != "auto" else "sse", dialect, rng, pools[dialect])
        return (bytes(head) + m.data)[:max_size]

    args.out.mkdir(parents=True, exist_ok=True)
    save_stats()
    atheris.Setup([sys.argv[0], f"-max_total_time={max(1, int(args.seconds))}", f"-seed={args.seed + 1}",
                   "-max_len=262144", "-rss_limit_mb=4096", "-timeout=60", "-print_final_stats=0",
                   str(corpus)], one, custom_mutator=mutator)
    atheris.Fuzz()


# ---- the parent -------------------------------------------------------------------------------------------------
def run_atheris(*, seconds: float, seed: int, dialects: tuple[str, ...], out: Path, jobs: int = 1,
                log: Callable[[str], None] | None = None) -> Any:
    """Run ``jobs`` libFuzzer children for ``seconds``; return a ``Report`` of what they found."""
    try:
        import atheris  # noqa: F401
    except ImportError as exc:
        raise SystemExit(f"--atheris needs the atheris package (pip install atheris): {exc}") from None
    from .properties import Case, Failure
    from .runner import Finding, Report

    say = log or (lambda s: None)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("atheris-stats-*.json"):
        old.unlink()
    started = time.time() - 1.0
    root = Path(__file__).resolve().parent.parent
    t0 = time.perf_counter()
    procs = []
    with tempfile.TemporaryDirectory(prefix="toolwire-atheris-") as work:
        for j in range(max(1, jobs)):
            cmd = [sys.executable, "-m", "fuzz.atheris_mode", "--seconds", str(seconds), "--out", str(out),
                   "--work", str(Path(work) / f"job{j}"), "--seed", str(seed + j)]
            for d in dialects:
                cmd += ["--dialect", d]
            procs.append(subprocess.Popen(cmd, cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        say(f"fuzz: atheris, {len(procs)} libFuzzer process(es) for {seconds:g} s")
        for p in procs:
            p.wait()
    elapsed = time.perf_counter() - t0
    counts: Counter = Counter()
    for stats in out.glob("atheris-stats-*.json"):
        counts.update(json.loads(stats.read_text())["counts"])
        stats.unlink()
    findings: dict[str, Finding] = {}
    for path in sorted(out.glob("*.json")):
        if path.stat().st_mtime < started or path.name.startswith("atheris-stats-"):
            continue
        doc = json.loads(path.read_text())
        fl = doc["failure"]
        f = Finding(Failure(fl["prop"], fl["stage"], fl["type"], fl["message"], fl["where"], fl["dialect"]),
                    Case.from_json(doc["case"]), doc.get("input_number", 0), doc.get("hits", 1),
                    Counter(doc.get("dialects", {})), path)
        findings.setdefault(f.key, f)
    return Report(counts, sorted(findings.values(), key=lambda f: (f.failure.prop, f.key)), elapsed, seed, jobs)


if __name__ == "__main__":
    _child(sys.argv[1:])

"""``python -m fuzz``: see ``fuzz/__init__.py`` and the README's "Fuzzing" section."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .corpus import DIALECTS
from .runner import DEFAULT_OUT, format_report, replay, run


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m fuzz", description="Mutation fuzzer for toolwire.")
    budget = p.add_mutually_exclusive_group()
    budget.add_argument("--seconds", type=float, help="fuzz for this many seconds")
    budget.add_argument("--inputs", type=int, help="fuzz this many inputs (deterministic for a seed)")
    p.add_argument("--seed", type=int, default=0, help="run seed (default 0)")
    p.add_argument("--dialect", action="append", choices=DIALECTS, help="only this dialect (repeatable)")
    p.add_argument("--jobs", type=int, default=2, help="worker processes (default 2; 1 runs in this process)")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"where reproducers go (default {DEFAULT_OUT})")
    p.add_argument("--start", type=int, default=0, help="number of the first input (default 0)")
    p.add_argument("--minimize-checks", type=int, default=600,
                   help="checks spent shrinking each distinct failure (0: keep it as found)")
    p.add_argument("--hang-seconds", type=float, default=30.0,
                   help="an input that takes longer is reported as a hang (0: no limit)")
    p.add_argument("--replay", type=Path, metavar="FILE", help="check a reproducer file again")
    p.add_argument("--atheris", action="store_true",
                   help="coverage-guided mode with atheris (pip install atheris); --seconds bounds it")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.replay is not None:
        failures, key = replay(args.replay)
        for f in failures:
            print(f"{f.prop} ({f.stage}): {f.type}: {f.message}\n    where: {f.where}")
        if key is not None:
            again = any(f.key == key for f in failures)
            print(f"fuzz: the recorded failure {'reproduces' if again else 'does not reproduce'}: {key}")
        distinct = len({f.key for f in failures})
        print(f"fuzz: 1 inputs, {distinct} distinct failures")
        return 1 if failures else 0
    dialects = tuple(args.dialect) if args.dialect else DIALECTS
    log = None if args.quiet else (lambda s: print(s, file=sys.stderr, flush=True))
    if args.atheris:
        from .atheris_mode import run_atheris

        report = run_atheris(seconds=args.seconds or 60.0, seed=args.seed, dialects=dialects, out=args.out,
                             jobs=args.jobs, log=log)
    else:
        report = run(seconds=args.seconds, inputs=args.inputs, seed=args.seed, dialects=dialects, jobs=args.jobs,
                     out=args.out, minimize_checks=args.minimize_checks, hang_seconds=args.hang_seconds or None,
                     start=args.start, log=log)
    for line in format_report(report, args.out):
        print(line, flush=True)
    return 1 if report.findings else 0


if __name__ == "__main__":
    sys.exit(main())

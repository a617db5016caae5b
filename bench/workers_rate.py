"""The cost of durability: conversations per second on 1, 2 and 4 DBOS workers sharing PostgreSQL
(``toolwire demo --workers``), CPU per conversation by process, DBOS steps per conversation, and the same
conversations through the in-process ``ToolLoop`` against ``DurableLoop`` on one worker.

The conversations are the demo scenarios without planned faults (every dialect), ``rounds`` times each, enqueued
at once on a DBOS queue; the rate counts from the first enqueue to the last conversation's end (the workers'
start-up is not counted), and so does the CPU: the supervisor's (with the simulated provider's threads, which
answer every request) and the workers'. The supervisor waits with one query for all open conversations every
quarter second, never a status poll per conversation. Every point runs on a database of its own, created for it
on the PostgreSQL server (the test cluster, ``tests/pg_cluster.py``, loopback, fsync off; or
``TOOLWIRE_PG_DSN``) and dropped after. Each worker runs up to 4 conversations at once. The simulated provider
answers at once, so this measures toolwire's and DBOS's own work per conversation, not a model's latency.

The overhead point (``bench/durable_overhead.py``, a process of its own: it is the one worker) runs the same
conversations one after the other, first through ``ToolLoop`` then through ``DurableLoop.run`` (DBOS launched on a
fresh database), both with the same ``PostgresLedger``: wall and CPU ms per conversation, and their ratios.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

__all__ = ["rates", "line", "SCENARIOS", "fresh_database"]

#: the demo scenarios whose conversations need no planned fault
SCENARIOS = ("height", "height_weight", "rice", "misspelled_tool", "missing_argument", "catalogue_down")
ROOT = Path(__file__).resolve().parents[1]


@contextmanager
def fresh_database(dsn: str) -> Iterator[str]:
    """A database created on ``dsn``'s server for the block (dropped after): no rows of an earlier point."""
    import psycopg

    name = f"bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        base, _, _old = dsn.partition("?")[0].rpartition("/")
        query = dsn.partition("?")[2]
        yield f"{base}/{name}" + (f"?{query}" if query else "")
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _point(dsn: str, workers: int, rounds: int, scenarios: tuple[str, ...],
           providers: list[str] | None) -> dict[str, Any]:
    from toolwire.harness.workers import run_workers

    with fresh_database(dsn) as db:
        report = run_workers(workers, db, scenarios=scenarios, rounds=rounds, providers=providers,
                             count_steps=True)
    bad = [r for r in report.runs if r.error]
    if bad:
        raise RuntimeError(f"{len(bad)} conversations failed: {bad[0].error}")
    n = len(report.runs)
    cpu = report.cpu_seconds or {}
    return {"conversations": n, "seconds": report.busy_seconds, "per_s": n / report.busy_seconds,
            "steps_per_conversation": (report.steps or 0) / n,
            "cpu_ms_per_conversation": {k: 1000 * v / n for k, v in cpu.items()}}


def overhead(dsn: str, rounds: int = 1, scenarios: tuple[str, ...] = SCENARIOS,
             providers: list[str] | None = None) -> dict[str, Any]:
    """``ToolLoop`` against ``DurableLoop`` (one worker, in a process of its own, on a fresh database)."""
    with fresh_database(dsn) as db:
        env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
                   TOOLWIRE_BENCH_DSN=db)
        cmd = [sys.executable, "-m", "bench.durable_overhead", str(rounds), ",".join(scenarios),
               ",".join(providers or [])]
        done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        raise RuntimeError(f"the overhead run failed: {done.stderr.strip().splitlines()[-1:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def rates(workers: tuple[int, ...] = (1, 2, 4), rounds: int = 2, scenarios: tuple[str, ...] = SCENARIOS,
          providers: list[str] | None = None) -> dict[str, Any]:
    """Per worker count: conversations per second (and as a ratio to the first count), CPU ms per conversation
    by process, DBOS steps per conversation; under ``overhead``: durable against plain on one worker."""
    from .ledger_rate import postgres

    out: dict[str, Any] = {}
    try:
        with postgres() as dsn:
            points = {str(n): _point(dsn, n, rounds, scenarios, providers) for n in workers}
            base = points[str(workers[0])]["per_s"]
            for v in points.values():
                v["ratio"] = v["per_s"] / base
            out["workers"] = points
            out["overhead"] = overhead(dsn, rounds, scenarios, providers)
    except Exception as exc:  # noqa: BLE001 - the bench reports what it could not measure
        out = {"error": f"not measured ({type(exc).__name__}: {str(exc)[:200]})"}
    return out


def line(result: dict[str, Any]) -> str:
    if "error" in result:
        return f"workers: {result['error']}"
    points = result["workers"]
    first = next(iter(points.values()))
    rate = ", ".join(f"{n} worker{'s' if n != '1' else ''} {v['per_s']:.1f}/s ({v['ratio']:.2f}x)"
                     for n, v in points.items())
    cpu = ", ".join(f"{n}: " + " + ".join(f"{k} {ms:.0f}" for k, ms in v["cpu_ms_per_conversation"].items())
                    for n, v in points.items())
    o = result["overhead"]
    return (f"workers (PostgreSQL, a fresh database per point, {first['conversations']} conversations each, "
            f"conversations per second, ratio to 1 worker): {rate}\n"
            f"workers: CPU ms per conversation by process: {cpu}; DBOS steps per conversation "
            f"{first['steps_per_conversation']:.2f}\n"
            f"durable over plain (one worker, {o['conversations']} conversations in turn): wall ms per "
            f"conversation {o['plain']['wall_ms']:.1f} -> {o['durable']['wall_ms']:.1f} "
            f"({o['wall_ratio']:.2f}x), CPU ms {o['plain']['cpu_ms']:.1f} -> {o['durable']['cpu_ms']:.1f} "
            f"({o['cpu_ratio']:.2f}x), DBOS steps per conversation {o['durable']['steps_per_conversation']:.2f}")


if __name__ == "__main__":
    print(line(rates()))

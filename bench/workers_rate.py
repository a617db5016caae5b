"""Conversations per second on 1, 2, 4 and 8 DBOS workers sharing PostgreSQL (``toolwire demo --workers``).

The conversations are the demo scenarios without planned faults (every dialect), ``rounds`` times each, enqueued
at once on a DBOS queue; the rate counts from the first enqueue to the last conversation's end (the workers'
start-up is not counted). Each worker runs up to 4 conversations at once. PostgreSQL is the test cluster
(``tests/pg_cluster.py``, loopback, fsync off) or ``TOOLWIRE_PG_DSN``. The simulated provider answers at once,
so this measures toolwire's and DBOS's own work per conversation (steps written to PostgreSQL, queue polling),
not a model's latency.
"""

from __future__ import annotations

from typing import Any

__all__ = ["rates", "SCENARIOS"]

#: the demo scenarios whose conversations need no planned fault
SCENARIOS = ("height", "height_weight", "rice", "misspelled_tool", "missing_argument", "catalogue_down")


def rates(workers: tuple[int, ...] = (1, 2, 4, 8), rounds: int = 2) -> dict[str, Any]:
    """Conversations per second for each worker count, and each as a ratio to one worker."""
    from toolwire.harness.workers import run_workers

    from .ledger_rate import postgres

    out: dict[str, Any] = {}
    try:
        with postgres() as dsn:
            for n in workers:
                report = run_workers(n, dsn, scenarios=SCENARIOS, rounds=rounds)
                bad = [r for r in report.runs if r.error]
                if bad:
                    raise RuntimeError(f"{len(bad)} conversations failed: {bad[0].error}")
                out[str(n)] = {"conversations": len(report.runs), "seconds": report.busy_seconds,
                               "per_s": len(report.runs) / report.busy_seconds}
        base = out[str(workers[0])]["per_s"]
        for v in out.values():
            v["ratio"] = v["per_s"] / base
    except Exception as exc:  # noqa: BLE001 - the bench reports what it could not measure
        out = {"error": f"not measured ({type(exc).__name__}: {str(exc)[:200]})"}
    return out


def line(result: dict[str, Any]) -> str:
    if "error" in result:
        return f"workers: {result['error']}"
    parts = [f"{n} worker{'s' if n != '1' else ''} {v['per_s']:.1f}/s ({v['ratio']:.2f}x)" for n, v in result.items()]
    first = next(iter(result.values()))
    return (f"workers (PostgreSQL, {first['conversations']} conversations each, conversations per second, "
            f"ratio to 1 worker): " + ", ".join(parts))


if __name__ == "__main__":
    print(line(rates()))

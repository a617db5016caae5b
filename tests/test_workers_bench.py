"""The workers bench (bench/workers_rate.py) run with tiny sizes: the shape of what it reports (never timings)."""

from __future__ import annotations

import pytest

pytest.importorskip("dbos")
pytest.importorskip("psycopg")


def test_the_workers_bench_reports_rates_cpu_steps_and_the_durable_overhead(pg_dsn, monkeypatch):
    from bench import workers_rate

    monkeypatch.setenv("TOOLWIRE_PG_DSN", pg_dsn)
    result = workers_rate.rates(workers=(1, 2), rounds=1, scenarios=("height", "rice"), providers=["anthropic"])
    assert "error" not in result, result
    points = result["workers"]
    assert set(points) == {"1", "2"}
    for point in points.values():
        assert point["conversations"] == 2 and point["per_s"] > 0 and point["ratio"] > 0
        assert set(point["cpu_ms_per_conversation"]) == {"supervisor", "workers"}
        assert point["steps_per_conversation"] >= 3  # the start marker, a request, a dispatch, a request at least
    assert points["1"]["ratio"] == 1.0
    o = result["overhead"]
    assert o["conversations"] == 2
    assert o["plain"]["wall_ms"] > 0 and o["durable"]["wall_ms"] > 0 and o["wall_ratio"] > 0 and o["cpu_ratio"] > 0
    assert o["durable"]["steps_per_conversation"] == points["1"]["steps_per_conversation"]
    text = workers_rate.line(result)
    assert "conversations per second" in text and "durable over plain" in text and "steps per conversation" in text

"""`toolwire demo --workers` leaves no queue behind in the DBOS system database, and its workers poll only their
own queue: queues (and rows) left by earlier runs cost them nothing."""

from __future__ import annotations

import uuid
from contextlib import contextmanager
from typing import Iterator

import pytest

pytest.importorskip("dbos")
psycopg = pytest.importorskip("psycopg")

from toolwire.harness.workers import run_workers  # noqa: E402


@contextmanager
def _fresh_database(pg_dsn: str) -> Iterator[str]:
    """A new database on the test cluster (so that only this test's rows are in it), dropped after."""
    name = f"stale_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield pg_dsn.rsplit("/", 1)[0] + "/" + name
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _rows(dsn: str, sql: str, *args: object) -> list[tuple]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.execute(sql, args).fetchall()


def test_a_run_leaves_no_queue_and_no_workflow_row_of_its_queue(pg_dsn):
    """After a run on PostgreSQL, the system database has no row of the run's queue in ``workflow_status`` (nor its
    inputs, outputs and steps) and no entry for the queue in ``queues``."""
    with _fresh_database(pg_dsn) as dsn:
        report = run_workers(1, dsn, providers=["gemini"], scenarios=["height", "rice"])
        assert [wr.error for wr in report.runs] == [None, None]
        assert _rows(dsn, "SELECT queue_name, count(*) FROM dbos.workflow_status WHERE queue_name LIKE "
                          "'toolwire-demo-%%' GROUP BY queue_name") == []
        assert _rows(dsn, "SELECT name FROM dbos.queues WHERE name LIKE 'toolwire-demo-%%'") == []
        assert _rows(dsn, "SELECT count(*) FROM dbos.operation_outputs") == [(0,)]


def test_a_worker_does_not_poll_a_stale_queue_beside_its_own(pg_dsn):
    """A queue left by an earlier run (registered, with 20 enqueued conversations of a loop the workers have) is
    not listened to by a new run's workers: its rows stay ENQUEUED, never dequeued, while the run's own
    conversations finish."""
    from dbos import DBOSClient

    from toolwire.durable import enqueue

    with _fresh_database(pg_dsn) as dsn:
        run_workers(1, dsn, providers=["gemini"], scenarios=["height"])  # creates the DBOS tables
        client = DBOSClient(system_database_url=dsn)
        try:
            client.register_queue("toolwire-demo-stale", worker_concurrency=4, polling_interval_sec=0.1)
            for i in range(20):
                enqueue(client, "demo:gemini", "How tall am I?", conversation_id=f"stale-{i}",
                        workflow_id=f"stale-{i}:0", queue="toolwire-demo-stale")
        finally:
            client.destroy()
        report = run_workers(2, dsn, providers=["gemini"], scenarios=["height", "rice", "height_weight"])
        assert [wr.error for wr in report.runs] == [None, None, None]
        assert _rows(dsn, "SELECT status, count(*) FROM dbos.workflow_status WHERE queue_name = "
                          "'toolwire-demo-stale' GROUP BY status") == [("ENQUEUED", 20)]
        assert _rows(dsn, "SELECT name FROM dbos.queues") == [("toolwire-demo-stale",)]
